-- The months of sample, curve and sample_block: created ahead by ingest, dropped whole by
-- `perfguard db prune`, kept up (BRIN summaries, statistics) with the owner's rights that
-- the writer role lacks; and a run's rows removed from all three.

-- The month holding `at` (UTC months): its sample, curve and sample block partitions,
-- created if missing; its name. Serialised, so two ingests of one new month do not race
-- to create it.
CREATE OR REPLACE FUNCTION ensure_sample_month(p_at timestamptz) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    month_start timestamptz := date_trunc('month', p_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    suffix text := to_char(p_at AT TIME ZONE 'UTC', 'YYYY_MM');
    month_name text := 'sample_' || suffix;
    parent text;
BEGIN
    IF EXISTS (SELECT 1 FROM sample_month WHERE name = month_name AND pruned_at IS NULL)
       AND to_regclass('curve_' || suffix) IS NOT NULL
       AND to_regclass('sample_block_' || suffix) IS NOT NULL THEN
        RETURN month_name;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('perfguard sample months'));
    FOREACH parent IN ARRAY ARRAY['sample', 'curve', 'sample_block'] LOOP
        IF to_regclass(parent || '_' || suffix) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                           parent || '_' || suffix, parent, month_start,
                           month_start + interval '1 month');
        END IF;
    END LOOP;
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
        FOREACH part IN ARRAY ARRAY['sample', 'curve', 'sample_block'] LOOP
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

-- The BRIN ranges of every month's new pages (an unsummarized range matches every lookup).
CREATE OR REPLACE FUNCTION summarize_new_samples() RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    SELECT brin_summarize_new_values(relid) FROM pg_partition_tree('sample_testcase_brin')
    WHERE isleaf
$$;

-- The statistics of the month a new run landed in.
CREATE OR REPLACE FUNCTION analyze_results(p_at timestamptz) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    month_name text := 'sample_' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY_MM');
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

-- The blocks of the runs `p_runs` from their key figures in `sample` and their sweeps in
-- `curve` (benchmarks/ingest.py's copied runs): one per run, check, metric and point
-- list, its test cases in id order.
CREATE OR REPLACE FUNCTION store_sample_blocks(p_runs bigint[]) RETURNS bigint
    LANGUAGE sql SET search_path = public AS $$
    WITH sweeps AS (
        SELECT tc.run_id, cv.started_at, tc.check_name, cv.metric_id, cv.testcase_id,
               cv.point_ids,
               (SELECT string_agg(float8send(x), ''::bytea ORDER BY o)
                FROM unnest(cv.point_values) WITH ORDINALITY u(x, o)) AS point_values
        FROM run r JOIN testcase tc ON tc.run_id = r.id
        JOIN curve cv ON cv.testcase_id = tc.id AND cv.started_at = r.started_at
        WHERE r.id = ANY(p_runs)
        UNION ALL
        SELECT tc.run_id, s.started_at, tc.check_name, s.metric_id, s.testcase_id, '{0}',
               float8send(s.value)
        FROM run r JOIN testcase tc ON tc.run_id = r.id
        JOIN sample s ON s.testcase_id = tc.id AND s.started_at = r.started_at
        WHERE r.id = ANY(p_runs) AND s.point_id = 0),
    stored AS (
        INSERT INTO sample_block (run_id, started_at, check_name, metric_id, point_ids,
                                  testcase_ids, point_values)
        SELECT run_id, started_at, check_name, metric_id, point_ids,
               array_agg(testcase_id ORDER BY testcase_id),
               string_agg(point_values, ''::bytea ORDER BY testcase_id)
        FROM sweeps GROUP BY run_id, started_at, check_name, metric_id, point_ids
        RETURNING 1)
    SELECT count(*) FROM stored;
$$;

-- A run and everything stored of it, each month table read at the run's start only.
CREATE OR REPLACE FUNCTION delete_run(target bigint) RETURNS void LANGUAGE sql AS $$
    DELETE FROM sample
    WHERE started_at = (SELECT started_at FROM run WHERE id = target)
      AND testcase_id IN (SELECT id FROM testcase WHERE run_id = target);
    DELETE FROM curve
    WHERE started_at = (SELECT started_at FROM run WHERE id = target)
      AND testcase_id IN (SELECT id FROM testcase WHERE run_id = target);
    DELETE FROM sample_block
    WHERE started_at = (SELECT started_at FROM run WHERE id = target) AND run_id = target;
    DELETE FROM run WHERE id = target;
$$;
