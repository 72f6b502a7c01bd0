-- Every key-figure series (last attempts that passed) with the way that is better, in
-- run order: what change-point detection reads. `system`: one system, or NULL for all.
SELECT v.system, v.check_name, v.params, v.partition, v.environ, v.metric, v.run_id,
       v.value, d.better
FROM key_series_value v
JOIN metric_direction d ON d.check_name = v.check_name AND d.metric = v.metric
WHERE %(system)s::text IS NULL OR v.system = %(system)s
ORDER BY v.started_at, v.run_id
