-- A run's key figures that passed, each with its declared direction and the values of
-- the last `count` runs of its series up to that run (oldest first).
SELECT k.system, k.partition, k.environ, k.check_name, k.params, k.metric, k.unit, k.value,
       d.better,
       ARRAY(SELECT value FROM (
           SELECT v.value, v.started_at, v.run_id FROM series_value v
           WHERE v.system = k.system AND v.check_name = k.check_name AND v.params = k.params
             AND v.partition = k.partition AND v.environ = k.environ AND v.metric = k.metric
             AND v.point_id = 0 AND v.started_at <= k.started_at
           ORDER BY v.started_at DESC, v.run_id DESC LIMIT %(count)s) last
         ORDER BY started_at, run_id) AS history
FROM key_verdict k
LEFT JOIN metric_direction d ON d.check_name = k.check_name AND d.metric = k.metric
WHERE k.run_id = %(run_id)s AND k.testcase_state = 'pass'
ORDER BY k.check_name, k.params::text, k.metric
