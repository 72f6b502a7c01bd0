-- The given number of runs of the same system before the run, newest first.
SELECT p.id FROM run r JOIN run p ON p.system_id = r.system_id AND p.started_at < r.started_at
WHERE r.id = %s ORDER BY p.started_at DESC, p.id DESC LIMIT %s
