-- The newest run.
SELECT id FROM run ORDER BY started_at DESC, id DESC LIMIT 1
