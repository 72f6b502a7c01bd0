-- A run's key figures that passed, each with its declared direction and the values of
-- the last `count` runs of its series up to that run (oldest first): every series'
-- history taken in one pass over the system's key figures, not one pass per key figure.
WITH judged AS (
    SELECT k.system, k.partition, k.environ, k.check_name, k.params, k.metric, k.unit,
           k.value, k.started_at
    FROM key_verdict k
    WHERE k.run_id = %(run_id)s AND k.testcase_state = 'pass'),
placed AS (
    SELECT v.check_name, v.params, v.partition, v.environ, v.metric, v.value, v.started_at,
           v.run_id,
           row_number() OVER (PARTITION BY v.check_name, v.params, v.partition, v.environ,
                                           v.metric
                              ORDER BY v.started_at DESC, v.run_id DESC) AS place
    FROM key_series_value v
    WHERE v.system = (SELECT max(system) FROM judged)
      AND v.started_at <= (SELECT max(started_at) FROM judged)
      AND v.check_name = ANY(ARRAY(SELECT DISTINCT check_name FROM judged))),
histories AS (
    SELECT check_name, params, partition, environ, metric,
           array_agg(value ORDER BY started_at, run_id) AS history
    FROM placed WHERE place <= %(count)s
    GROUP BY 1, 2, 3, 4, 5)
SELECT j.system, j.partition, j.environ, j.check_name, j.params, j.metric, j.unit, j.value,
       d.better, coalesce(h.history, '{}') AS history
FROM judged j
LEFT JOIN histories h ON h.check_name = j.check_name AND h.params = j.params
                     AND h.partition = j.partition AND h.environ = j.environ
                     AND h.metric = j.metric
LEFT JOIN metric_direction d ON d.check_name = j.check_name AND d.metric = j.metric
ORDER BY j.check_name, j.params::text, j.metric
