-- Earlier values of every pair of a sweep run: the same system, HCA, memory, server,
-- client and metric, in full sweeps (not retests) before it, oldest first.
SELECT p.hca, p.memory, p.server, p.client, p.metric, p.value
FROM run cur JOIN system sy ON sy.id = cur.system_id
JOIN sweep_pair p ON p.system = sy.name AND p.started_at < cur.started_at
JOIN run r ON r.id = p.run_id
WHERE cur.id = %s AND r.trigger = 'sweep' AND NOT 'sweep-retest' = ANY(r.labels)
  AND p.metric = ANY(%s)
ORDER BY p.started_at, p.run_id
