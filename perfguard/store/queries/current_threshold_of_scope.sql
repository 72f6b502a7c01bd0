-- The threshold in force of one scope, locked: setting one closes it.
SELECT id, system, partition, environ, check_name, params, metric, point, reference, lower,
       upper, bounds, unit, direction, valid_from, valid_to, author, reason
FROM threshold
WHERE system = %(system)s AND coalesce(partition, '') = coalesce(%(partition)s, '')
  AND coalesce(environ, '') = coalesce(%(environ)s, '') AND check_name = %(check)s
  AND params = %(params)s AND metric = %(metric)s
  AND coalesce(point, 'null'::jsonb) = coalesce(%(point)s, 'null'::jsonb)
  AND valid_to IS NULL
FOR UPDATE
