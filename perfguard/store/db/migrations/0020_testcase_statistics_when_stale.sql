-- Ingest refreshed the test cases' statistics on every run (0012) so that the views it
-- reads plan a new run by its size. A nightly run of 2,000 test cases beside 10^6 stored
-- ones changes nothing the planner counts, yet sampling them took 0.18–0.30 s of a
-- 1.3 s ingest at 2·10^7 samples (and the verdict analyzes them again). Now only a run
-- that adds more than a tenth of the test cases the statistics know (the first runs of a
-- new database, one much larger than those before) is analyzed first: the rule
-- autovacuum follows (autovacuum_analyze_scale_factor 0.1), applied before the run is
-- read. Returns whether it analyzed.
DROP FUNCTION analyze_testcases();
CREATE FUNCTION analyze_testcases(p_added bigint) RETURNS boolean
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
