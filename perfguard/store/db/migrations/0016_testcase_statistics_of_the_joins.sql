-- Ingest refreshes the test cases' statistics so that the planner knows a new run (0012).
-- What it needs of them are the columns the views filter and join on; the jsonb
-- parameters, node lists and texts cost most of the sampling's time (290-350 ms of a
-- 250,000-sample ingest at 2·10^7 samples, 160 ms without them) and keep the statistics
-- autovacuum gives them.
CREATE OR REPLACE FUNCTION analyze_testcases() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$ BEGIN
        ANALYZE testcase (run_id, check_name, unique_name, partition_id, environ_id,
                          run_index, result);
    END $$;
