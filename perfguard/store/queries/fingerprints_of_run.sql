-- Every node's fingerprint in the run.
SELECT n.name AS node, f.* FROM fingerprint f JOIN node n ON n.id = f.node_id
WHERE f.run_id = %s
