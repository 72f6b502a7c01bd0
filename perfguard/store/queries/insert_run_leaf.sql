-- One node's leaf switch for a run (again: the newer reading wins).
INSERT INTO run_leaf (run_id, node, leaf)
VALUES (%(run_id)s, %(node)s, %(leaf)s)
ON CONFLICT (run_id, node) DO UPDATE SET leaf = EXCLUDED.leaf
