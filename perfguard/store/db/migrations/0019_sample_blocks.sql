-- The judge reads the values of every series of a run's checks over its 33 newest nights:
-- for a run of 2,000 test cases 396,000 rows of `curve`, grouped into 12,000 curves in
-- PostgreSQL (sorting and array_agg: 1.4 of the 2.6 s a 4,000-line verdict took at
-- 2·10^7 samples), and for a run of 50,000 test cases 3.3·10^6 key figures of `sample`
-- grouped into 100,000 series (4.5 of 11.5 s). Ingest now also keeps each run's values of
-- one check, metric and point list as one block: its test cases (rows) and their values
-- (a matrix of float8, big-endian as float8send writes it, test cases × points); the key
-- figures are the blocks of the point list {0}. The same history is then a few thousand
-- rows read as they lie, split into series by numpy. `sample` and `curve` stay what the
-- dashboards and reports read; `sample_block` is the judge's. Partitioned by month,
-- created and pruned with the samples.
CREATE TABLE sample_block (
    run_id        bigint NOT NULL,
    started_at    timestamptz NOT NULL,
    check_name    text NOT NULL,
    metric_id     smallint NOT NULL,
    point_ids     integer[] NOT NULL,
    testcase_ids  bigint[] NOT NULL,
    point_values  bytea NOT NULL,
    CHECK (octet_length(point_values)
           = 8 * cardinality(point_ids) * cardinality(testcase_ids))
) PARTITION BY RANGE (started_at);
CREATE INDEX sample_block_run ON sample_block (started_at, check_name);

-- The blocks of the runs `p_runs` from their key figures in `sample` and their sweeps in
-- `curve` (what was stored before this migration; the benchmark's copied runs): one per
-- run, check, metric and point list, its test cases in id order.
CREATE FUNCTION store_sample_blocks(p_runs bigint[]) RETURNS bigint
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

-- The month holding `at`: its sample, curve and curve block partitions, created if
-- missing.
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

SELECT ensure_sample_month(starts) FROM sample_month WHERE pruned_at IS NULL;
SELECT store_sample_blocks(array_agg(id)) FROM run;

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
