UPDATE acknowledgement SET cleared_at = now(), cleared_by = %s
WHERE id = %s AND cleared_at IS NULL RETURNING subject
