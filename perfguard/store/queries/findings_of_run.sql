SELECT * FROM finding WHERE run_id = %s ORDER BY ordinal
