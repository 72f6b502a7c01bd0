SELECT r.id FROM run r JOIN system s ON s.id = r.system_id WHERE s.name = '$system' ORDER BY r.started_at DESC LIMIT 50
