-- judged_testcase keeps the last attempt of each test case with a NOT EXISTS over the run's
-- test cases. Planned before the statistics know a new run, a run of 50,000 test cases was
-- taken for one: the anti join probed every test case of the run for every test case
-- (2.5·10^9 comparisons, 10 minutes for one ingest). Ingest refreshes the statistics of
-- the test cases (a sample of 30,000 rows, tens of milliseconds) once it has copied them,
-- before anything reads the run through the views. Runs with the owner's rights (0010).
CREATE FUNCTION analyze_testcases() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$ BEGIN ANALYZE testcase; END $$;
REVOKE ALL ON FUNCTION analyze_testcases FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analyze_testcases TO perfguard_writer;

-- Pruning trusts the rollups ingest keeps (and 0011 made for what was stored before):
-- recomputing a month's nights first took 65 s of a prune at 6.6·10^6 samples.
CREATE OR REPLACE FUNCTION prune_sample_months(p_before timestamptz) RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    month record;
BEGIN
    FOR month IN SELECT * FROM sample_month
                 WHERE ends <= p_before AND pruned_at IS NULL ORDER BY starts LOOP
        EXECUTE format('ALTER TABLE sample DETACH PARTITION %I', month.name);
        EXECUTE format('DROP TABLE %I', month.name);
        UPDATE sample_month SET pruned_at = now() WHERE name = month.name;
        RETURN NEXT month.name;
    END LOOP;
END
$$;

-- Grafana's panels are lookups of milliseconds; JIT compiling them cost up to a second
-- each. Where the migrating role may not alter the reader role, the DBA does it
-- (docs/grafana.md).
DO $$
BEGIN
    ALTER ROLE perfguard_grafana SET jit = off;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'ALTER ROLE perfguard_grafana SET jit = off is the DBA''s to run';
END
$$;
