-- Every metric's id and name.
SELECT id, name FROM metric
