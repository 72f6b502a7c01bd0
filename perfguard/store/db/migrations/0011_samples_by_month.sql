-- Samples partitioned by month of their run's start (PostgreSQL's declarative range
-- partitioning), so a year of a large centre's nightly runs is twelve tables, the
-- verdict reads the month or two its history lies in, and `perfguard db prune` drops
-- whole months instead of deleting rows. Key figures survive the prune as per-night
-- rollups (key_figure_night), which the trend panels read for long ranges.

-- The months that exist, created ahead by ingest (and `perfguard db prune`, which also
-- records when a month's samples were dropped: a report then says it cannot show them).
CREATE TABLE sample_month (
    name        text PRIMARY KEY,
    starts      timestamptz NOT NULL UNIQUE,
    ends        timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    pruned_at   timestamptz
);

ALTER TABLE sample RENAME TO sample_unpartitioned;
ALTER INDEX sample_testcase_brin RENAME TO sample_unpartitioned_brin;
ALTER INDEX sample_key_figures RENAME TO sample_unpartitioned_key_figures;

-- started_at is the run's start: the partition key, and what the history queries
-- bound so that only the months they read are scanned.
CREATE TABLE sample (
    testcase_id  bigint NOT NULL,
    metric_id    smallint NOT NULL,
    point_id     integer NOT NULL,
    value        double precision NOT NULL,
    ref_value    double precision,
    ref_lower    double precision,
    ref_upper    double precision,
    started_at   timestamptz NOT NULL
) PARTITION BY RANGE (started_at);

-- The month holding `at` (UTC months), created if missing; its name. Runs as the owner:
-- ingest calls it as perfguard_writer, which may not create tables. Serialised, so two
-- ingests of one new month do not race to create it.
CREATE FUNCTION ensure_sample_month(p_at timestamptz) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    month_start timestamptz := date_trunc('month', p_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    month_name text := 'sample_' || to_char(p_at AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    IF EXISTS (SELECT 1 FROM sample_month WHERE name = month_name AND pruned_at IS NULL) THEN
        RETURN month_name;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('perfguard sample months'));
    IF to_regclass(month_name) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF sample FOR VALUES FROM (%L) TO (%L)',
                       month_name, month_start, month_start + interval '1 month');
    END IF;
    INSERT INTO sample_month (name, starts, ends)
    VALUES (month_name, month_start, month_start + interval '1 month')
    ON CONFLICT (name) DO UPDATE SET pruned_at = NULL;
    RETURN month_name;
END
$$;

SELECT ensure_sample_month(m)
FROM (SELECT DISTINCT date_trunc('month', started_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS m
      FROM run) months;
SELECT ensure_sample_month(now());

INSERT INTO sample (testcase_id, metric_id, point_id, value, ref_value, ref_lower, ref_upper,
                    started_at)
SELECT s.testcase_id, s.metric_id, s.point_id, s.value, s.ref_value, s.ref_lower, s.ref_upper,
       r.started_at
FROM sample_unpartitioned s
JOIN testcase tc ON tc.id = s.testcase_id
JOIN run r ON r.id = tc.run_id;

-- Samples arrive run by run and in test-case order, so a BRIN index per month finds a
-- run's samples (started_at) or a test case's curve (testcase_id) at a fraction of a
-- btree's insert cost. Key figures get a btree led by the run's start: the verdict reads
-- every key figure of its recent runs through it, without a lookup per test case.
CREATE INDEX sample_testcase_brin ON sample USING brin (started_at, testcase_id)
    WITH (pages_per_range = 16, autosummarize = on);
CREATE INDEX sample_key_figures ON sample (started_at, testcase_id, metric_id) INCLUDE (value)
    WHERE point_id = 0;

-- The views over samples, as before, now joining on the run's start too: a join from a
-- run to its samples is pruned to the month the run is in.
CREATE OR REPLACE VIEW key_verdict AS
SELECT r.id AS run_id, r.started_at, r.trigger, r.labels, sy.name AS system,
       p.name AS partition, e.name AS environ, tc.id AS testcase_id, tc.check_name,
       tc.params, tc.result, tc.fail_reason, tc.nodelist, m.name AS metric, m.unit, s.value,
       th.id AS threshold_id, th.reference, th.lower, th.upper, th.bounds, th.direction,
       th.lower_limit, th.upper_limit,
       threshold_status(s.value, th.id, th.lower_limit, th.upper_limit) AS status,
       tc.state AS testcase_state
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN judged_testcase tc ON tc.run_id = r.id
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN sample s ON s.testcase_id = tc.id AND s.started_at = r.started_at AND s.point_id = 0
JOIN metric m ON m.id = s.metric_id
LEFT JOIN LATERAL matching_threshold(sy.name, tc.check_name, m.name, NULL, p.name, e.name,
                                     tc.params, r.started_at) th ON true;

CREATE OR REPLACE VIEW series_value AS
SELECT r.id AS run_id, r.started_at, sy.name AS system, tc.check_name, tc.params,
       p.name AS partition, e.name AS environ, m.name AS metric, m.unit, s.point_id,
       pt.coords AS point, s.value, tc.nodelist
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN judged_testcase tc ON tc.run_id = r.id AND tc.state = 'pass'
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN sample s ON s.testcase_id = tc.id AND s.started_at = r.started_at
JOIN metric m ON m.id = s.metric_id
JOIN point pt ON pt.id = s.point_id;

CREATE OR REPLACE VIEW sweep_pair AS
SELECT r.id AS run_id, r.started_at, sy.name AS system, tc.params->>'hca' AS hca,
       tc.params->>'memory' AS memory, pt.coords->>'server' AS server,
       pt.coords->>'client' AS client, m.name AS metric, m.unit, s.value,
       pt.coords->>'test' AS failed_test
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN judged_testcase tc ON tc.run_id = r.id AND tc.check_name = 'FabricSweepCheck'
JOIN sample s ON s.testcase_id = tc.id AND s.started_at = r.started_at
JOIN metric m ON m.id = s.metric_id
JOIN point pt ON pt.id = s.point_id
WHERE pt.coords ? 'server';

DROP TABLE sample_unpartitioned;

CREATE OR REPLACE FUNCTION delete_run(target bigint) RETURNS void LANGUAGE sql AS $$
    DELETE FROM sample
    WHERE started_at = (SELECT started_at FROM run WHERE id = target)
      AND testcase_id IN (SELECT id FROM testcase WHERE run_id = target);
    DELETE FROM run WHERE id = target;
$$;

-- Upkeep as the owner (0010), per month now: the BRIN ranges of every month's new pages,
-- and the statistics of the month a new run landed in.
CREATE OR REPLACE FUNCTION summarize_new_samples() RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    SELECT brin_summarize_new_values(relid) FROM pg_partition_tree('sample_testcase_brin')
    WHERE isleaf
$$;
CREATE FUNCTION analyze_results(p_at timestamptz) RETURNS void
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
DROP FUNCTION analyze_results();

-- Per-night rollups of every key-figure series (last attempts that passed): what the
-- trend panels read over long ranges, and what stays of a month once it is pruned.
-- Nights are UTC dates of the runs' starts. Ingest refreshes the nights of its run.
CREATE TABLE key_figure_night (
    system      text NOT NULL,
    check_name  text NOT NULL,
    params      jsonb NOT NULL,
    partition   text NOT NULL,
    environ     text NOT NULL,
    metric      text NOT NULL,
    unit        text NOT NULL,
    night       date NOT NULL,
    median      double precision NOT NULL,
    min         double precision NOT NULL,
    max         double precision NOT NULL,
    count       integer NOT NULL,
    PRIMARY KEY (system, check_name, metric, params, partition, environ, night)
);
CREATE INDEX key_figure_night_night ON key_figure_night (night);

CREATE FUNCTION refresh_key_figure_nights(p_system text, p_from date, p_to date)
RETURNS void LANGUAGE sql AS $$
    DELETE FROM key_figure_night
    WHERE system = p_system AND night >= p_from AND night <= p_to;
    INSERT INTO key_figure_night (system, check_name, params, partition, environ, metric, unit,
                                  night, median, min, max, count)
    SELECT v.system, v.check_name, v.params, v.partition, v.environ, v.metric, v.unit,
           (v.started_at AT TIME ZONE 'UTC')::date,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY v.value), min(v.value), max(v.value),
           count(*)
    FROM series_value v
    WHERE v.system = p_system AND v.point_id = 0
      AND v.started_at >= p_from::timestamp AT TIME ZONE 'UTC'
      AND v.started_at < (p_to + 1)::timestamp AT TIME ZONE 'UTC'
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;
$$;

SELECT refresh_key_figure_nights(sy.name, min((r.started_at AT TIME ZONE 'UTC')::date),
                                 max((r.started_at AT TIME ZONE 'UTC')::date))
FROM run r JOIN system sy ON sy.id = r.system_id GROUP BY sy.name;

-- Drop the months that end at or before `p_before` (whole partitions, never row
-- deletes); runs, test cases, verdict lines and the key figures' nightly rollups stay.
-- Returns the months dropped. The rollups of their nights are refreshed first.
CREATE FUNCTION prune_sample_months(p_before timestamptz) RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    month record;
    sys record;
BEGIN
    FOR month IN SELECT * FROM sample_month
                 WHERE ends <= p_before AND pruned_at IS NULL ORDER BY starts LOOP
        FOR sys IN SELECT DISTINCT sy.name FROM run r JOIN system sy ON sy.id = r.system_id
                   WHERE r.started_at >= month.starts AND r.started_at < month.ends LOOP
            PERFORM refresh_key_figure_nights(
                sys.name, (month.starts AT TIME ZONE 'UTC')::date,
                (month.ends AT TIME ZONE 'UTC')::date - 1);
        END LOOP;
        EXECUTE format('ALTER TABLE sample DETACH PARTITION %I', month.name);
        EXECUTE format('DROP TABLE %I', month.name);
        UPDATE sample_month SET pruned_at = now() WHERE name = month.name;
        RETURN NEXT month.name;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION ensure_sample_month, summarize_new_samples, analyze_results(timestamptz),
    prune_sample_months FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ensure_sample_month, summarize_new_samples,
    analyze_results(timestamptz) TO perfguard_writer;

-- Dropping months is the schema owner's (`perfguard db prune`), not a nightly writer's.
REVOKE ALL ON FUNCTION prune_sample_months FROM perfguard_writer;

GRANT SELECT ON sample_month, key_figure_night TO perfguard_grafana;
GRANT SELECT, INSERT, UPDATE, DELETE ON key_figure_night, sample_month TO perfguard_writer;
