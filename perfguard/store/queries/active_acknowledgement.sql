SELECT id FROM acknowledgement WHERE system = %s AND subject = %s AND cleared_at IS NULL
