-- Each of the nodes as it was at the run: its fingerprint in the newest run
-- of the same system up to that one that used it.
SELECT DISTINCT ON (n.name) n.name AS node, f.*
FROM run base JOIN run r ON r.system_id = base.system_id AND r.started_at <= base.started_at
JOIN fingerprint f ON f.run_id = r.id JOIN node n ON n.id = f.node_id
WHERE base.id = %s AND n.name = ANY(%s)
ORDER BY n.name, r.started_at DESC, r.id DESC
