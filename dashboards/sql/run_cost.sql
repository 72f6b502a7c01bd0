SELECT r.started_at AS "time", r.id AS run, r.trigger, array_to_string(r.labels, ',') AS labels,
       c.jobs, c.node_hours, c.queue_wait_s, c.longest_wait_s
FROM run r JOIN system sy ON sy.id = r.system_id JOIN run_cost c ON c.run_id = r.id
WHERE $__timeFilter(r.started_at) AND sy.name = '$system'
ORDER BY r.started_at DESC
