-- When each node of a system was last measured (the node_coverage view), oldest first.
SELECT node, last_measured_at, last_per_node_at, last_run_id, devices, oldest_device_at
FROM node_coverage WHERE system = %s
ORDER BY last_per_node_at NULLS FIRST, last_measured_at NULLS FIRST, node
