-- One answer to "did this run fail?", read by `perfguard run`, `nightly`, `upgrade-check`,
-- `verdict`, `report` and Grafana alike.

-- The states that fail a run: perfguard.states.FAILING, written in when this file is
-- applied (one definition for Python and SQL). Skipped and expected-failure never fail it.
CREATE OR REPLACE FUNCTION failing_status(p_status text) RETURNS boolean
    LANGUAGE sql IMMUTABLE AS $$
    SELECT p_status IN (@FAILING_STATES@)
$$;

-- Whether too little was measured: skips, and fewer test cases with a key figure than
-- the floor's share of those measured or skipped (at least one). Runs of sanity checks
-- alone (nothing skipped, nothing to measure) still pass.
CREATE OR REPLACE FUNCTION too_little_measured(
    p_measured integer, p_skipped integer, p_floor double precision) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(p_skipped, 0) > 0
       AND coalesce(p_measured, 0) < greatest(1, p_floor * (coalesce(p_measured, 0)
                                                            + p_skipped))
$$;

-- A run's counts, once when its verdict is recorded (perfguard.judge.verdict.record):
-- the run history panel read every test case and line of every run in view (366 ms at
-- 2·10^7 samples, growing with the runs). A regression line counts as failing only
-- through a paged finding; lines judged before findings (paged unknown) count as before.
-- `missed_thresholds`: the key figures (point {}) the recorded verdict found off their
-- threshold (line status `fail`, key_verdict's), as ingest counted them through
-- key_verdict before (23 ms of each night's report); a run never judged has none counted.
CREATE OR REPLACE FUNCTION summarize_run(p_run bigint) RETURNS void LANGUAGE sql AS $$
    UPDATE run SET (judged_lines, failing_lines, regressions, improvements, inconclusive,
                    measured, paged_findings, blind_lines, missed_thresholds) = (
        SELECT count(*),
               count(*) FILTER (WHERE failing_status(v.status)
                                  AND (v.status <> 'regression' OR v.paged IS NOT FALSE)),
               count(*) FILTER (WHERE v.status = 'regression'),
               count(*) FILTER (WHERE v.status = 'improvement'),
               count(*) FILTER (WHERE v.status = 'inconclusive'),
               count(DISTINCT (v.check_name, v.params::text, v.partition, v.environ))
                   FILTER (WHERE v.value IS NOT NULL),
               (SELECT count(*) FROM finding f WHERE f.run_id = p_run AND f.paged),
               count(*) FILTER (WHERE v.blind_nights > 0),
               count(*) FILTER (WHERE v.status = 'fail' AND v.point = '{}')
        FROM verdict_line v WHERE v.run_id = p_run),
      (passed, failed, skipped, expected_failures, aborted, disturbed) = (
        SELECT count(*) FILTER (WHERE tc.state = 'pass'),
               count(*) FILTER (WHERE tc.state = 'test-failed'),
               count(*) FILTER (WHERE tc.state = 'skipped'),
               count(*) FILTER (WHERE tc.state = 'expected-failure'),
               count(*) FILTER (WHERE tc.state = 'aborted'),
               count(*) FILTER (WHERE tc.state = 'disturbed')
        FROM judged_testcase tc WHERE tc.run_id = p_run)
    WHERE id = p_run;
$$;

-- outcome: 'fail' (a paged finding, a failing line, or nothing judged at all: a run never
-- summarised counts as nothing judged), 'interrupted' (test cases aborted by SIGINT,
-- SIGTERM or the stall watchdog, and nothing that finished failed: an interruption never
-- pages), 'nothing-measured' or 'pass'; `failed` is "fail".
CREATE OR REPLACE VIEW run_outcome AS
SELECT r.id AS run_id,
       coalesce(r.judged_lines, 0)::bigint AS judged_lines,
       coalesce(r.failing_lines, 0)::bigint AS failing_lines,
       coalesce(r.judged_lines, 0) = 0 OR r.failing_lines > 0
           OR coalesce(r.paged_findings, 0) > 0 AS failed,
       CASE WHEN coalesce(r.judged_lines, 0) = 0 THEN 'nothing of the run was judged'
            WHEN coalesce(r.paged_findings, 0) > 0
            THEN r.paged_findings || ' finding(s) paged: '
                 || (SELECT string_agg(f.subject, '; ' ORDER BY f.ordinal) FROM finding f
                     WHERE f.run_id = r.id AND f.paged)
                 || CASE WHEN r.failing_lines > 0
                         THEN '; ' || r.failing_lines || ' of ' || r.judged_lines
                              || ' lines failed, regressed or did not run to the end'
                         ELSE '' END
            WHEN r.failing_lines > 0
            THEN r.failing_lines || ' of ' || r.judged_lines
                 || ' lines failed, regressed or did not run to the end'
            WHEN coalesce(r.aborted, 0) > 0
            THEN r.aborted || ' test case(s) aborted by an interruption, neither passed nor '
                 || 'failed; ' || coalesce(r.passed, 0) || ' finished and passed'
            WHEN too_little_measured(r.measured, r.skipped, r.measured_floor)
            THEN coalesce(r.measured, 0) || ' test case(s) measured, ' || r.skipped
                 || ' skipped: nothing was measured that could pass'
            WHEN coalesce(r.regressions, 0) > 0
            THEN 'no finding paged; ' || r.regressions || ' line(s) regressed below the '
                 || 'family-wise bar (verdict: findings)'
            ELSE 'no line failed or regressed' END
       || CASE WHEN coalesce(r.disturbed, 0) > 0
               THEN '; ' || r.disturbed || ' test case(s) measured while other processes '
                    || 'shared their CPUs: not judged (verdict: disturbed)'
               ELSE '' END AS why,
       CASE WHEN coalesce(r.judged_lines, 0) = 0 OR r.failing_lines > 0
                 OR coalesce(r.paged_findings, 0) > 0 THEN 'fail'
            WHEN coalesce(r.aborted, 0) > 0 THEN 'interrupted'
            WHEN too_little_measured(r.measured, r.skipped, r.measured_floor)
            THEN 'nothing-measured'
            ELSE 'pass' END AS outcome,
       coalesce(r.measured, 0) AS measured,
       coalesce(r.aborted, 0) AS aborted,
       coalesce(r.blind_lines, 0) AS blind_lines,
       coalesce(r.disturbed, 0) AS disturbed
FROM run r;

GRANT EXECUTE ON FUNCTION failing_status, too_little_measured TO perfguard_grafana;
