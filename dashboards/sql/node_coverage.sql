SELECT c.node, extract(epoch FROM now() - c.last_per_node_at) / 86400 AS per_node_age_days,
       extract(epoch FROM now() - c.last_measured_at) / 86400 AS any_check_age_days,
       c.last_per_node_at, c.last_run_id AS run, array_to_string(c.devices, ', ') AS devices
FROM node_coverage c
WHERE c.system = '$system'
ORDER BY c.last_per_node_at NULLS FIRST, c.node
