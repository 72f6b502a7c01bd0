-- A run's verdict lines, before they are recorded again.
DELETE FROM verdict_line WHERE run_id = %s
