-- The node matrix of an upgrade check's run (its HTML report): one row per node.
SELECT node, passed, changed, figure, own_level, drained, resumed, label
FROM upgrade_node WHERE run_id = %s ORDER BY id
