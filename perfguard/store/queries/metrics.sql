-- Every metric's id, name and unit.
SELECT id, name, unit FROM metric
