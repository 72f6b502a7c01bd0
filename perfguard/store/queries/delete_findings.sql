-- A run's findings, before they are recorded again.
DELETE FROM finding WHERE run_id = %s
