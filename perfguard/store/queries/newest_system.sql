-- The system of the newest run: the one `perfguard verdict` shows without a run, and
-- what `perfguard ack` acknowledges on unless told another.
SELECT s.name FROM run r JOIN system s ON s.id = r.system_id
ORDER BY r.started_at DESC, r.id DESC LIMIT 1
