-- The run of the same system just before the run.
SELECT p.id FROM run r JOIN run p ON p.system_id = r.system_id AND p.started_at < r.started_at
WHERE r.id = %s ORDER BY p.started_at DESC, p.id DESC LIMIT 1
