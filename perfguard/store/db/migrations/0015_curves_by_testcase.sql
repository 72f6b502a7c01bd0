-- Every size of every curve is judged against its own history: for a run of 2,000 test
-- cases, 230,000 series of 66 runs. Read from `sample`, that is 15 million rows to sort
-- and group per series (17–19 s of a 35 s verdict at 2·10^7 samples). Ingest now also
-- keeps each sweep of a test case whole, as one row: its point ids and its values in the
-- report's order, so the curves' history is 660,000 rows. `sample` stays what every
-- other reader (dashboards, report, sweep) reads; `curve` is the judge's copy of it.
-- Partitioned by month like the samples: created, and dropped by prune, with them.
CREATE TABLE curve (
    testcase_id   bigint NOT NULL,
    metric_id     smallint NOT NULL,
    started_at    timestamptz NOT NULL,
    point_ids     integer[] NOT NULL,
    point_values  double precision[] NOT NULL,
    CHECK (cardinality(point_ids) = cardinality(point_values))
) PARTITION BY RANGE (started_at);
CREATE INDEX curve_run ON curve (started_at, testcase_id);

-- The month holding `at`: its sample and curve partitions, created if missing.
CREATE OR REPLACE FUNCTION ensure_sample_month(p_at timestamptz) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    month_start timestamptz := date_trunc('month', p_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    month_name text := 'sample_' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY_MM');
    curve_name text := 'curve_' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    IF EXISTS (SELECT 1 FROM sample_month WHERE name = month_name AND pruned_at IS NULL)
       AND to_regclass(curve_name) IS NOT NULL THEN
        RETURN month_name;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('perfguard sample months'));
    IF to_regclass(month_name) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF sample FOR VALUES FROM (%L) TO (%L)',
                       month_name, month_start, month_start + interval '1 month');
    END IF;
    IF to_regclass(curve_name) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF curve FOR VALUES FROM (%L) TO (%L)',
                       curve_name, month_start, month_start + interval '1 month');
    END IF;
    INSERT INTO sample_month (name, starts, ends)
    VALUES (month_name, month_start, month_start + interval '1 month')
    ON CONFLICT (name) DO UPDATE SET pruned_at = NULL;
    RETURN month_name;
END
$$;

SELECT ensure_sample_month(starts) FROM sample_month WHERE pruned_at IS NULL;

-- What was stored before: one row per test case and metric, its points in id order.
INSERT INTO curve (testcase_id, metric_id, started_at, point_ids, point_values)
SELECT testcase_id, metric_id, started_at, array_agg(point_id ORDER BY point_id),
       array_agg(value ORDER BY point_id)
FROM sample WHERE point_id <> 0
GROUP BY testcase_id, metric_id, started_at;

CREATE OR REPLACE FUNCTION prune_sample_months(p_before timestamptz) RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    month record;
    curve_name text;
BEGIN
    FOR month IN SELECT * FROM sample_month
                 WHERE ends <= p_before AND pruned_at IS NULL ORDER BY starts LOOP
        EXECUTE format('ALTER TABLE sample DETACH PARTITION %I', month.name);
        EXECUTE format('DROP TABLE %I', month.name);
        curve_name := 'curve_' || to_char(month.starts AT TIME ZONE 'UTC', 'YYYY_MM');
        IF to_regclass(curve_name) IS NOT NULL THEN
            EXECUTE format('ALTER TABLE curve DETACH PARTITION %I', curve_name);
            EXECUTE format('DROP TABLE %I', curve_name);
        END IF;
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
    DELETE FROM run WHERE id = target;
$$;
