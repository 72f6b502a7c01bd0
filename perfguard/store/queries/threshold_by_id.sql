-- One threshold row.
SELECT id, system, partition, environ, check_name, params, metric, point, reference, lower,
       upper, bounds, unit, direction, valid_from, valid_to, author, reason
FROM threshold WHERE id = %s
