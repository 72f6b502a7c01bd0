-- A run that measured nothing does not pass. Its own outcome, 'nothing-measured', for
-- the CLI (exit 3), the report, JUnit and the dashboards alike: some of its test cases
-- were skipped and fewer than the site's floor measured a key figure (by default: none).
-- Runs of sanity checks alone (nothing skipped, nothing to measure) still pass.
ALTER TABLE run
    ADD COLUMN measured       integer,
    -- verdict_rules.yaml's run.min_measured_share when the verdict was recorded
    ADD COLUMN measured_floor double precision NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION summarize_run(p_run bigint) RETURNS void LANGUAGE sql AS $$
    UPDATE run SET (judged_lines, failing_lines, regressions, improvements, inconclusive,
                    measured) = (
        SELECT count(*), count(*) FILTER (WHERE failing_status(v.status)),
               count(*) FILTER (WHERE v.status = 'regression'),
               count(*) FILTER (WHERE v.status = 'improvement'),
               count(*) FILTER (WHERE v.status = 'inconclusive'),
               count(DISTINCT (v.check_name, v.params::text, v.partition, v.environ))
                   FILTER (WHERE v.value IS NOT NULL)
        FROM verdict_line v WHERE v.run_id = p_run),
      (passed, failed, skipped, expected_failures) = (
        SELECT count(*) FILTER (WHERE tc.state = 'pass'),
               count(*) FILTER (WHERE tc.state = 'test-failed'),
               count(*) FILTER (WHERE tc.state = 'skipped'),
               count(*) FILTER (WHERE tc.state = 'expected-failure')
        FROM judged_testcase tc WHERE tc.run_id = p_run)
    WHERE id = p_run;
$$;

SELECT summarize_run(id) FROM run;

-- Whether too little was measured: skips, and fewer test cases with a key figure than
-- the floor's share of those measured or skipped (at least one).
CREATE FUNCTION too_little_measured(p_measured integer, p_skipped integer,
                                    p_floor double precision) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(p_skipped, 0) > 0
       AND coalesce(p_measured, 0) < greatest(1, p_floor * (coalesce(p_measured, 0)
                                                            + p_skipped))
$$;
GRANT EXECUTE ON FUNCTION too_little_measured TO perfguard_grafana;

-- outcome: 'fail', 'nothing-measured' or 'pass'; failed stays "a failing line or nothing
-- judged", so panels that read it keep their meaning.
CREATE OR REPLACE VIEW run_outcome AS
SELECT r.id AS run_id,
       coalesce(r.judged_lines, 0)::bigint AS judged_lines,
       coalesce(r.failing_lines, 0)::bigint AS failing_lines,
       coalesce(r.judged_lines, 0) = 0 OR r.failing_lines > 0 AS failed,
       CASE WHEN coalesce(r.judged_lines, 0) = 0 THEN 'nothing of the run was judged'
            WHEN r.failing_lines > 0
            THEN r.failing_lines || ' of ' || r.judged_lines
                 || ' lines failed, regressed or did not run to the end'
            WHEN too_little_measured(r.measured, r.skipped, r.measured_floor)
            THEN coalesce(r.measured, 0) || ' test case(s) measured, ' || r.skipped
                 || ' skipped: nothing was measured that could pass'
            ELSE 'no line failed or regressed' END AS why,
       CASE WHEN coalesce(r.judged_lines, 0) = 0 OR r.failing_lines > 0 THEN 'fail'
            WHEN too_little_measured(r.measured, r.skipped, r.measured_floor)
            THEN 'nothing-measured'
            ELSE 'pass' END AS outcome,
       coalesce(r.measured, 0) AS measured
FROM run r;
GRANT SELECT ON run_outcome TO perfguard_grafana;
