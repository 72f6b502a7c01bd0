-- Every node an upgrade's batches measured (label), each at its latest batch.
SELECT DISTINCT ON (node) node, passed, run_id, changed, figure, drained, checked_at
FROM upgrade_node WHERE label = %s ORDER BY node, checked_at DESC, id DESC
