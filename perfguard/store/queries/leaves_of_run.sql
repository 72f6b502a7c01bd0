-- The run's leaf switches, each with its nodes (none where none was recorded).
SELECT leaf, array_agg(node ORDER BY node) AS nodes
FROM run_leaf
WHERE run_id = %s
GROUP BY leaf
ORDER BY leaf
