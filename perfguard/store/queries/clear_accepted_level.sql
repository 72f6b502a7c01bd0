-- `perfguard accept --clear ID`: the level withdrawn, kept with who and when.
UPDATE accepted_level SET cleared_at = now(), cleared_by = %s
WHERE id = %s AND cleared_at IS NULL RETURNING subject
