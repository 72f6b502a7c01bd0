-- Figures of checks that ran on one node each (ReFrame's --distribute: the '.nid'
-- parameter names the node) for the given nodes: those of the runs given, or, with
-- upto, of the system's runs up to that run (each node's own level before an upgrade).
SELECT v.run_id, v.check_name, v.params - '.nid' - '.part' AS params, v.partition,
       v.environ, v.params->>'.nid' AS node, v.metric, v.unit, v.value,
       coalesce(d.better, 'higher') AS better
FROM key_series_value v
LEFT JOIN metric_direction d ON d.check_name = v.check_name AND d.metric = v.metric
WHERE v.system = %(system)s AND v.params ? '.nid' AND v.params->>'.nid' = ANY(%(nodes)s)
  AND (v.run_id = ANY(%(runs)s)
       OR v.started_at <= (SELECT started_at FROM run WHERE id = %(upto)s))
ORDER BY v.started_at, v.run_id
