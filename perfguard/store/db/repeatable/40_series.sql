-- What the judge, the reports and the dashboards read of stored values: key figures with
-- their threshold, every judged value as a point of its series, the sweep's pairs, the
-- runs a judgement reads, and the per-night rollups. Joins from a run to its samples
-- carry the run's start, so they read the month the run is in.

-- Every key figure (a ReFrame perf variable) of a last attempt, with the threshold valid
-- when its run started (matching_threshold) and pass / fail / no-reference. Where the
-- database has none, the check's own reference that ReFrame compared it to (ref_*:
-- threshold_id NULL, limits from ReFrame's fractions, the direction its bounds say).
CREATE OR REPLACE VIEW key_verdict AS
SELECT r.id AS run_id, r.started_at, r.trigger, r.labels, sy.name AS system,
       p.name AS partition, e.name AS environ, tc.id AS testcase_id,
       s.check_name,  -- the block's: a filter on it reads only that check's blocks
       tc.params, tc.result, tc.fail_reason, tc.nodelist, m.name AS metric, m.unit, s.value,
       th.id AS threshold_id, coalesce(th.reference, own.reference) AS reference, th.lower,
       th.upper, th.bounds, coalesce(th.direction, own.direction) AS direction,
       coalesce(th.lower_limit, own.lower_limit) AS lower_limit,
       coalesce(th.upper_limit, own.upper_limit) AS upper_limit,
       threshold_status(s.value, coalesce(th.id, own.id),
                        coalesce(th.lower_limit, own.lower_limit),
                        coalesce(th.upper_limit, own.upper_limit)) AS status,
       tc.state AS testcase_state
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN key_figure s ON s.run_id = r.id AND s.started_at = r.started_at
JOIN judged_testcase tc ON tc.id = s.testcase_id  -- from the run's blocks to its test cases
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN metric m ON m.id = s.metric_id
LEFT JOIN LATERAL matching_threshold(sy.name, tc.check_name, m.name, NULL, p.name, e.name,
                                     tc.params, r.started_at) th ON true
LEFT JOIN LATERAL (SELECT 0::bigint AS id, s.ref_value AS reference,
                          s.ref_value + abs(s.ref_value) * s.ref_lower AS lower_limit,
                          s.ref_value + abs(s.ref_value) * s.ref_upper AS upper_limit,
                          reference_direction(s.ref_lower, s.ref_upper) AS direction
                   ) own ON th.id IS NULL AND s.ref_value IS NOT NULL;

-- The points that are a size of a curve ({"size": 65536}) and that size: one definition
-- for the judge's curves, the report's and the dashboard's (a point of another shape,
-- {"size": "64K"} or {"nodes": 4}, is no size).
CREATE OR REPLACE VIEW sized_point AS
SELECT id, coords, (coords->>'size')::bigint AS size FROM point
WHERE coords ? 'size' AND jsonb_typeof(coords->'size') = 'number';

-- Every judged value (last attempts that passed) as a point of its series: system, check,
-- variant, partition, environ, metric and point.
CREATE OR REPLACE VIEW series_value AS
SELECT r.id AS run_id, r.started_at, sy.name AS system, s.check_name, tc.params,
       p.name AS partition, e.name AS environ, m.name AS metric, m.unit, s.point_id,
       pt.coords AS point, s.value, tc.nodelist
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN sample s ON s.run_id = r.id AND s.started_at = r.started_at
JOIN judged_testcase tc ON tc.id = s.testcase_id AND tc.state = 'pass'
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN metric m ON m.id = s.metric_id
JOIN point pt ON pt.id = s.point_id;

-- series_value of the key figures alone, read from their own blocks: through
-- series_value a `point_id = 0` is tested on every curve's values after they are
-- unpacked (change-point detection took 1.5 s at 2·10^7 samples, thresholds from
-- history over 2 min: one pass over every curve per key figure).
CREATE OR REPLACE VIEW key_series_value AS
SELECT r.id AS run_id, r.started_at, sy.name AS system, k.check_name, tc.params,
       p.name AS partition, e.name AS environ, m.name AS metric, m.unit, k.value, tc.nodelist
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN key_figure k ON k.run_id = r.id AND k.started_at = r.started_at
JOIN judged_testcase tc ON tc.id = k.testcase_id AND tc.state = 'pass'
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN metric m ON m.id = k.metric_id;

-- Every pair measurement of every sweep (loopback: server = client), with the HCA and
-- memory of its variant: the node × node matrix and each pair's history. A measurement
-- that failed is metric 'failed' with the test that failed (tag_bw, tag_lat).
CREATE OR REPLACE VIEW sweep_pair AS
SELECT r.id AS run_id, r.started_at, sy.name AS system, tc.params->>'hca' AS hca,
       tc.params->>'memory' AS memory, pt.coords->>'server' AS server,
       pt.coords->>'client' AS client, m.name AS metric, m.unit, s.value,
       pt.coords->>'test' AS failed_test
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN sample s ON s.run_id = r.id AND s.started_at = r.started_at
             AND s.check_name = 'FabricSweepCheck'
JOIN judged_testcase tc ON tc.id = s.testcase_id
JOIN metric m ON m.id = s.metric_id
JOIN point pt ON pt.id = s.point_id
WHERE pt.coords ? 'server';

-- The runs a judgement reads: the newest `how_many` runs of the run's system, up to and
-- including it, that ran any of `checks`; judging a run costs the same after a year of
-- nightly runs as after a month.
CREATE OR REPLACE FUNCTION recent_runs(p_run bigint, p_checks text[], p_how_many integer)
RETURNS SETOF bigint LANGUAGE sql STABLE AS $$
    SELECT r.id FROM run cur
    JOIN run r ON r.system_id = cur.system_id AND r.started_at <= cur.started_at
    WHERE cur.id = p_run
      AND EXISTS (SELECT 1 FROM testcase tc
                  WHERE tc.run_id = r.id AND tc.check_name = ANY(p_checks))
    ORDER BY r.started_at DESC, r.id DESC
    LIMIT p_how_many
$$;

-- The per-night rollups (key_figure_night) of a system's nights from `p_from` to `p_to`.
CREATE OR REPLACE FUNCTION refresh_key_figure_nights(p_system text, p_from date, p_to date)
RETURNS void LANGUAGE sql AS $$
    DELETE FROM key_figure_night
    WHERE system = p_system AND night >= p_from AND night <= p_to;
    INSERT INTO key_figure_night (system, check_name, params, partition, environ, metric, unit,
                                  night, median, min, max, count)
    WITH runs AS (
        SELECT r.id, r.started_at FROM run r JOIN system sy ON sy.id = r.system_id
        WHERE sy.name = p_system
          AND r.started_at >= p_from::timestamp AT TIME ZONE 'UTC'
          AND r.started_at < (p_to + 1)::timestamp AT TIME ZONE 'UTC'),
    -- the nights' key figures first, from their runs' blocks (0027), then their test
    -- cases by id: planned the other way round (per test case, its run's blocks), a
    -- night of 2,000 test cases took seconds
    figures AS MATERIALIZED (
        SELECT k.started_at, k.testcase_id, k.metric_id, k.value
        FROM runs JOIN key_figure k ON k.run_id = runs.id AND k.started_at = runs.started_at),
    -- grouped by the variant (the digest of check and parameters' text) and ids, names
    -- joined after: sorting on the parameters' jsonb took 24 ms of a 4,000-figure night,
    -- this 17. The same groups as by check and parameters while every parameter value is
    -- a string (store/report.py `_params` reads them from ReFrame's display name): jsonb
    -- that are equal then have one text
    nights AS (
        SELECT min(tc.check_name) AS check_name, (array_agg(tc.params))[1] AS params,
               tc.partition_id, tc.environ_id, v.metric_id,
               (v.started_at AT TIME ZONE 'UTC')::date AS night,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY v.value) AS median,
               min(v.value) AS min, max(v.value) AS max, count(*) AS count
        FROM figures v
        JOIN judged_testcase tc ON tc.id = v.testcase_id AND tc.state = 'pass'
        GROUP BY tc.variant, tc.partition_id, tc.environ_id, v.metric_id, 6)
    SELECT p_system, n.check_name, n.params, p.name, e.name, m.name, m.unit, n.night,
           n.median, n.min, n.max, n.count
    FROM nights n
    JOIN partition p ON p.id = n.partition_id
    JOIN environ e ON e.id = n.environ_id
    JOIN metric m ON m.id = n.metric_id;
$$;

GRANT EXECUTE ON FUNCTION recent_runs TO perfguard_grafana;
