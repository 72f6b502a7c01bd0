-- Verdict states of a test case; only the last attempt of a retried one is judged.
--
-- ReFrame's result → perfguard's state (one mapping, read by the CLI verdict, the
-- workflows and the dashboards alike):
--   pass                  → pass
--   skip, fail_deps       → skipped           (did not run: shape, provider, dependency)
--   xfail                 → expected-failure  (failed as a reference said it would)
--   abort                 → aborted           (an interruption stopped it: SIGINT, SIGTERM)
--   disturbed             → disturbed         (measured while other processes shared its
--                                              CPUs: figures kept, neither judged nor a
--                                              baseline; perfguard's, store/report.py)
--   fail, xpass           → test-failed       (xpass: passed where a failure was expected)
--   fail in performance,  → pass              (every figure measured, one or more missed
--   references missed                          its reference: each figure is judged on its
--                                              own, and only one that missed fails;
--                                              ReFrame fails the whole test case)
-- An attempt that ReFrame retried (--max-retries) is superseded by its last attempt.
CREATE OR REPLACE VIEW judged_testcase AS
SELECT tc.id, tc.run_id, tc.check_name, tc.unique_name, tc.hashcode, tc.params,
       tc.partition_id, tc.environ_id, tc.run_index, tc.result, tc.fail_phase,
       tc.fail_reason, tc.slurm_jobid, tc.nodelist, tc.job_exitcode, tc.time_total,
       CASE tc.result
            WHEN 'pass' THEN 'pass'
            WHEN 'success' THEN 'pass'
            WHEN 'skip' THEN 'skipped'
            WHEN 'fail_deps' THEN 'skipped'
            WHEN 'xfail' THEN 'expected-failure'
            WHEN 'abort' THEN 'aborted'
            WHEN 'disturbed' THEN 'disturbed'
            WHEN 'fail' THEN CASE WHEN tc.fail_phase = 'performance'
                                   AND tc.fail_reason LIKE '%failed to meet reference%'
                                  THEN 'pass' ELSE 'test-failed' END
            ELSE 'test-failed' END AS state,
       tc.variant
FROM testcase tc
WHERE NOT tc.superseded;

-- Whatever stores test cases (ingest's COPY, an INSERT) marks what its rows supersede,
-- among themselves and those stored before: the runs it stored to, read by their index.
-- (Found by a NOT EXISTS on every read instead, the verdict's history probed that anti
-- join once per test case of the recent runs: 4.3 s of a 100,000-line verdict.)
CREATE OR REPLACE FUNCTION mark_superseded_testcases() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE testcase tc SET superseded = true
    FROM added
    WHERE tc.run_id = added.run_id AND tc.unique_name = added.unique_name
      AND tc.partition_id = added.partition_id AND tc.environ_id = added.environ_id
      AND tc.run_index < added.run_index AND NOT tc.superseded
      AND tc.run_id IN (SELECT DISTINCT run_id FROM added);
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER testcase_superseded AFTER INSERT ON testcase
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION mark_superseded_testcases();

-- The test cases' statistics, refreshed by ingest before anything reads a run through the
-- views, but only when the run adds more than a tenth of the test cases the statistics
-- know (autovacuum's analyze_scale_factor 0.1, applied before the run is read): planned
-- before the statistics knew a new run of 50,000 test cases, judged_testcase's join took
-- 10 minutes; sampling on every ingest cost 0.18–0.30 s of 1.3 s. Returns whether it
-- analyzed. Runs with the owner's rights: the writer may not ANALYZE.
CREATE OR REPLACE FUNCTION analyze_testcases(p_added bigint) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF (SELECT reltuples FROM pg_class WHERE oid = 'testcase'::regclass) >= 10 * p_added THEN
        RETURN false;
    END IF;
    ANALYZE testcase (run_id, check_name, unique_name, partition_id, environ_id, run_index,
                      result, superseded, variant);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION analyze_testcases FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analyze_testcases TO perfguard_writer;
