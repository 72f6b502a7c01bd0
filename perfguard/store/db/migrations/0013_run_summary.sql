-- What the run history panel and run_outcome read, counted once per run when its verdict
-- is recorded (`summarize_run`, called by perfguard.judge.verdict.record) instead of
-- over every test case and verdict line of every run in view: over a year of runs of
-- 2,000 test cases the panel took 366 ms at 2·10^7 samples and grew with the runs.
ALTER TABLE run
    ADD COLUMN judged_lines      integer,
    ADD COLUMN failing_lines     integer,
    ADD COLUMN regressions       integer,
    ADD COLUMN improvements      integer,
    ADD COLUMN inconclusive      integer,
    ADD COLUMN passed            integer,
    ADD COLUMN failed            integer,
    ADD COLUMN skipped           integer,
    ADD COLUMN expected_failures integer;

CREATE FUNCTION summarize_run(p_run bigint) RETURNS void LANGUAGE sql AS $$
    UPDATE run SET (judged_lines, failing_lines, regressions, improvements, inconclusive) = (
        SELECT count(*), count(*) FILTER (WHERE failing_status(v.status)),
               count(*) FILTER (WHERE v.status = 'regression'),
               count(*) FILTER (WHERE v.status = 'improvement'),
               count(*) FILTER (WHERE v.status = 'inconclusive')
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

-- The one answer to "did this run fail?" (0009), from the counts: a failing line, or
-- nothing judged at all (never summarised counts as nothing judged).
CREATE OR REPLACE VIEW run_outcome AS
SELECT r.id AS run_id,
       coalesce(r.judged_lines, 0)::bigint AS judged_lines,
       coalesce(r.failing_lines, 0)::bigint AS failing_lines,
       coalesce(r.judged_lines, 0) = 0 OR r.failing_lines > 0 AS failed,
       CASE WHEN coalesce(r.judged_lines, 0) = 0 THEN 'nothing of the run was judged'
            WHEN r.failing_lines > 0
            THEN r.failing_lines || ' of ' || r.judged_lines
                 || ' lines failed, regressed or did not run to the end'
            ELSE 'no line failed or regressed' END AS why
FROM run r;
