-- A test case's variant (its check and parameters, as one digest) stored with it: the
-- judge's history reads computed md5(check || params) for every test case of the recent
-- runs (1.4 s of a 100,000-line verdict's 10 s key-figure read) and grouped by it.
-- The table is rewritten once (8 s for 1.9·10^6 test cases on the 2-core box).
ALTER TABLE testcase ADD COLUMN variant uuid
    GENERATED ALWAYS AS (md5(check_name || ' ' || params::text)::uuid) STORED;

-- 0017's view, the variant appended.
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
            ELSE 'test-failed' END AS state,
       tc.variant
FROM testcase tc
WHERE NOT tc.superseded;

-- The planner's count of a run's series (the judge groups by variant).
CREATE OR REPLACE FUNCTION analyze_testcases() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$ BEGIN
        ANALYZE testcase (run_id, check_name, unique_name, partition_id, environ_id,
                          run_index, result, superseded, variant);
    END $$;
