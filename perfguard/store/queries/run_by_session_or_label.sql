-- The newest run of a session uuid, or carrying a label.
SELECT id FROM run WHERE session_uuid::text = %(r)s OR %(r)s = ANY(labels)
ORDER BY started_at DESC LIMIT 1
