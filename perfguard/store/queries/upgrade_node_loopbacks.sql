-- Each node's HCAs in loopback (a sweep's pair of a node with itself) for the given
-- nodes: of the runs given, or, with upto, of the system's full sweeps up to that run
-- (each node's own level before an upgrade; a retest is no level).
SELECT p.run_id, p.hca, p.memory, p.server AS node, p.metric, p.unit, p.value
FROM sweep_pair p JOIN run r ON r.id = p.run_id
WHERE p.system = %(system)s AND p.server = p.client AND p.server = ANY(%(nodes)s)
  AND p.metric IN ('bandwidth', 'latency')
  AND (p.run_id = ANY(%(runs)s)
       OR (r.trigger = 'sweep' AND NOT 'sweep-retest' = ANY(r.labels)
           AND p.started_at <= (SELECT started_at FROM run WHERE id = %(upto)s)))
ORDER BY p.started_at, p.run_id
