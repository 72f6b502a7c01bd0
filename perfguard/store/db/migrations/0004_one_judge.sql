-- One threshold-matching rule, and what history-based verdicts read.

-- The threshold that applies to one value: same system, check and metric, the same point
-- (NULL: a key figure), partition / environ / each variant parameter either unset or
-- equal, valid when the run started; the most specific wins, then the newest, then the
-- last one stored (a tie is decided, never left to row order). The run's references,
-- the CLI verdict and the dashboards all call this function.
CREATE FUNCTION matching_threshold(p_system text, p_check text, p_metric text, p_point jsonb,
                                   p_partition text, p_environ text, p_params jsonb,
                                   p_at timestamptz)
RETURNS SETOF threshold_limit LANGUAGE sql STABLE AS $$
    SELECT t.* FROM threshold_limit t
    WHERE t.system = p_system AND t.check_name = p_check AND t.metric = p_metric
      AND t.point IS NOT DISTINCT FROM p_point
      AND (t.partition IS NULL OR t.partition = p_partition)
      AND (t.environ IS NULL OR t.environ = p_environ)
      AND p_params @> t.params
      AND t.valid_from <= p_at AND (t.valid_to IS NULL OR t.valid_to > p_at)
    ORDER BY t.specificity DESC, t.valid_from DESC, t.id DESC
    LIMIT 1
$$;

-- Pass or fail against the limits of the matched threshold (none matched: no-reference);
-- the key figures' view and the CLI's curve points both decide with it.
CREATE FUNCTION threshold_status(value double precision, threshold_id bigint,
                                 lower_limit double precision, upper_limit double precision)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN threshold_id IS NULL THEN 'no-reference'
                WHEN (lower_limit IS NULL OR value >= lower_limit)
                 AND (upper_limit IS NULL OR value <= upper_limit) THEN 'pass'
                ELSE 'fail' END
$$;

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
JOIN sample s ON s.testcase_id = tc.id AND s.point_id = 0
JOIN metric m ON m.id = s.metric_id
LEFT JOIN LATERAL matching_threshold(sy.name, tc.check_name, m.name, NULL, p.name, e.name,
                                     tc.params, r.started_at) th ON true;

-- Which way is better, per check and metric, as the check declares it (its
-- `perfguard_better`): never guessed from a unit.
CREATE TABLE metric_direction (
    check_name  text NOT NULL,
    metric      text NOT NULL,
    better      text NOT NULL CHECK (better IN ('higher', 'lower')),
    PRIMARY KEY (check_name, metric)
);

-- Every judged value (last attempts that passed) as a point of its series: system, check,
-- variant, partition, environ, metric and point. History baselines read it backwards
-- from a run.
CREATE VIEW series_value AS
SELECT r.id AS run_id, r.started_at, sy.name AS system, tc.check_name, tc.params,
       p.name AS partition, e.name AS environ, m.name AS metric, m.unit, s.point_id,
       pt.coords AS point, s.value, tc.nodelist
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN judged_testcase tc ON tc.run_id = r.id AND tc.state = 'pass'
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN sample s ON s.testcase_id = tc.id
JOIN metric m ON m.id = s.metric_id
JOIN point pt ON pt.id = s.point_id;

GRANT SELECT ON key_verdict, metric_direction, series_value TO perfguard_grafana;
GRANT EXECUTE ON FUNCTION matching_threshold, threshold_status TO perfguard_grafana;
