-- A run by its id.
SELECT id FROM run WHERE id = %s
