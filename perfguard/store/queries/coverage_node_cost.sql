-- What one node cost in each of a system's recent budget nightlies (label 'coverage'),
-- the newest first: the run's node-hours over the nodes its sweep ran on, a job that ran
-- into its time limit counted twice (what it would have taken is more than it took).
WITH recent AS (
    SELECT r.id, r.started_at FROM run r JOIN system sy ON sy.id = r.system_id
    WHERE sy.name = %(system)s AND 'coverage' = ANY(r.labels)
    ORDER BY r.started_at DESC LIMIT %(runs)s)
SELECT p.run_id, p.node_hours / p.nodes AS per_node
FROM (
    SELECT recent.id AS run_id, recent.started_at,
           (SELECT sum(j.nodes * j.elapsed_s
                       * CASE WHEN j.state LIKE 'TIMEOUT%%' THEN 2 ELSE 1 END) / 3600.0
            FROM run_job j WHERE j.run_id = recent.id) AS node_hours,
           (SELECT count(DISTINCT node.name) FROM testcase tc
            CROSS JOIN LATERAL unnest(tc.nodelist) AS node(name)
            WHERE tc.run_id = recent.id AND tc.check_name = 'FabricSweepCheck') AS nodes
    FROM recent) p
WHERE p.node_hours IS NOT NULL AND p.nodes > 0
ORDER BY p.started_at DESC
