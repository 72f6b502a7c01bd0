-- A test case's earlier attempts (ReFrame's retries, run_index below the last) are marked
-- when a later one is stored, instead of found by judged_testcase's NOT EXISTS on every
-- read: the verdict's history reads probed that anti join once per test case of the recent
-- runs (0.7 of a 3.4 s curve read at 2·10^7 samples, 4.3 s of a 100,000-line verdict).
ALTER TABLE testcase ADD COLUMN superseded boolean NOT NULL DEFAULT false;

UPDATE testcase tc SET superseded = true
WHERE EXISTS (
    SELECT 1 FROM testcase later
    WHERE later.run_id = tc.run_id AND later.unique_name = tc.unique_name
      AND later.partition_id = tc.partition_id AND later.environ_id = tc.environ_id
      AND later.run_index > tc.run_index);

-- Whatever stores test cases (ingest's COPY, an INSERT) marks what its rows supersede,
-- among themselves and those stored before: the runs it stored to, read by their index.
CREATE FUNCTION mark_superseded_testcases() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER testcase_superseded AFTER INSERT ON testcase
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION mark_superseded_testcases();

-- The same columns as 0004's tc.*, the same rule (the last attempt), read from the mark.
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
            ELSE 'test-failed' END AS state
FROM testcase tc
WHERE NOT tc.superseded;

CREATE OR REPLACE FUNCTION analyze_testcases() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$ BEGIN
        ANALYZE testcase (run_id, check_name, unique_name, partition_id, environ_id,
                          run_index, result, superseded);
    END $$;
