-- The months of sample_block (every stored value, 0027): created ahead by ingest, dropped
-- whole by `perfguard db prune`, kept up (statistics) with the owner's rights that the
-- writer role lacks; a run's rows removed; and the point-wise views of the values.

-- The month holding `at` (UTC months): its sample block partition, created if missing;
-- its name. Serialised, so two ingests of one new month do not race to create it.
CREATE OR REPLACE FUNCTION ensure_sample_month(p_at timestamptz) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    month_start timestamptz := date_trunc('month', p_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    suffix text := to_char(p_at AT TIME ZONE 'UTC', 'YYYY_MM');
    month_name text := 'sample_' || suffix;
BEGIN
    IF EXISTS (SELECT 1 FROM sample_month WHERE name = month_name AND pruned_at IS NULL)
       AND to_regclass('sample_block_' || suffix) IS NOT NULL THEN
        RETURN month_name;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('perfguard sample months'));
    IF to_regclass('sample_block_' || suffix) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF sample_block FOR VALUES FROM (%L) TO (%L)',
                       'sample_block_' || suffix, month_start, month_start + interval '1 month');
    END IF;
    INSERT INTO sample_month (name, starts, ends)
    VALUES (month_name, month_start, month_start + interval '1 month')
    ON CONFLICT (name) DO UPDATE SET pruned_at = NULL;
    RETURN month_name;
END
$$;

-- Drop the months that end at or before `p_before` (whole partitions, never row
-- deletes); runs, test cases, verdict lines and the key figures' nightly rollups (kept
-- by ingest) stay. Returns the months dropped. The schema owner's, not a writer's.
CREATE OR REPLACE FUNCTION prune_sample_months(p_before timestamptz) RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    month record;
    part text;
BEGIN
    FOR month IN SELECT * FROM sample_month
                 WHERE ends <= p_before AND pruned_at IS NULL ORDER BY starts LOOP
        FOREACH part IN ARRAY ARRAY['sample_block'] LOOP
            IF to_regclass(part || substr(month.name, 7)) IS NOT NULL THEN
                EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', part,
                               part || substr(month.name, 7));
                EXECUTE format('DROP TABLE %I', part || substr(month.name, 7));
            END IF;
        END LOOP;
        UPDATE sample_month SET pruned_at = now() WHERE name = month.name;
        RETURN NEXT month.name;
    END LOOP;
END
$$;

-- Nothing left to summarize (0027 dropped the BRIN-indexed `sample`); kept for the
-- ingests of older code that call it.
CREATE OR REPLACE FUNCTION summarize_new_samples() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$ BEGIN END $$;

-- The statistics of the month a new run landed in.
CREATE OR REPLACE FUNCTION analyze_results(p_at timestamptz) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    month_name text := 'sample_block_' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    ANALYZE testcase, point;
    IF to_regclass(month_name) IS NOT NULL THEN
        EXECUTE format('ANALYZE %I', month_name);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION ensure_sample_month, summarize_new_samples, analyze_results,
    prune_sample_months FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ensure_sample_month, summarize_new_samples, analyze_results
    TO perfguard_writer;
REVOKE ALL ON FUNCTION prune_sample_months FROM perfguard_writer;

-- Every key figure (the blocks of the point list {0}) as a row: its test case, value and
-- the reference ReFrame compared it to. Each block's arrays are read once (unnest in
-- step); a query that joins it by run (and check) reads only that run's blocks.
CREATE OR REPLACE VIEW key_figure AS
SELECT b.run_id, b.started_at, b.check_name, k.testcase_id, b.metric_id, 0 AS point_id,
       k.value, k.ref_value, k.ref_lower, k.ref_upper
FROM sample_block b
CROSS JOIN LATERAL ROWS FROM (unnest(b.testcase_ids), unnest(b.point_values),
                              unnest(b.ref_values), unnest(b.ref_lowers),
                              unnest(b.ref_uppers))
    AS k(testcase_id, value, ref_value, ref_lower, ref_upper)
WHERE b.point_ids = '{0}';

-- A block of sweeps, row by row (test case, point, value), its arrays read once.
CREATE OR REPLACE FUNCTION block_rows(p_testcases bigint[], p_points integer[],
                                      p_values double precision[])
RETURNS TABLE (testcase_id bigint, point_id integer, value double precision)
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    testcases bigint[] := p_testcases;
    points integer[] := p_points;
    width integer := cardinality(p_points);
    k integer := 0;
    v double precision;
BEGIN
    FOREACH v IN ARRAY p_values LOOP
        testcase_id := testcases[k / width + 1];
        point_id := points[k % width + 1];
        value := v;
        k := k + 1;
        RETURN NEXT;
    END LOOP;
END
$$;

-- Every stored value as a row (what `sample` held before 0027): the key figures and every
-- point of every sweep. For the few point-wise readers; join it by run (and check).
CREATE OR REPLACE VIEW sample AS
SELECT run_id, started_at, check_name, testcase_id, metric_id, point_id, value, ref_value,
       ref_lower, ref_upper
FROM key_figure
UNION ALL
SELECT b.run_id, b.started_at, b.check_name, s.testcase_id, b.metric_id, s.point_id, s.value,
       NULL, NULL, NULL
FROM sample_block b CROSS JOIN LATERAL block_rows(b.testcase_ids, b.point_ids,
                                                  b.point_values) s
WHERE b.point_ids <> '{0}';

-- A run and everything stored of it, each month table read at the run's start only.
CREATE OR REPLACE FUNCTION delete_run(target bigint) RETURNS void LANGUAGE sql AS $$
    DELETE FROM sample_block
    WHERE started_at = (SELECT started_at FROM run WHERE id = target) AND run_id = target;
    DELETE FROM run WHERE id = target;
$$;
