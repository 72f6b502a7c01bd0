-- What one node cost in each of a system's recent budget nightlies (label 'coverage'):
-- the run's node-hours over the nodes its sweep measured, the newest first.
SELECT r.id AS run_id, c.node_hours / count(DISTINCT node.name) AS per_node
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN run_cost c ON c.run_id = r.id
JOIN judged_testcase tc ON tc.run_id = r.id AND tc.state IN ('pass', 'test-failed')
                        AND tc.check_name = 'FabricSweepCheck'
CROSS JOIN LATERAL unnest(tc.nodelist) AS node(name)
WHERE sy.name = %(system)s AND 'coverage' = ANY(r.labels)
GROUP BY r.id, r.started_at, c.node_hours
ORDER BY r.started_at DESC
LIMIT %(runs)s
