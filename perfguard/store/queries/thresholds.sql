-- The thresholds of a system and check (either may be null: all), in force or every row.
SELECT id, system, partition, environ, check_name, params, metric, point, reference, lower,
       upper, bounds, unit, direction, valid_from, valid_to, author, reason
FROM threshold
WHERE (NOT %(in_force_only)s OR valid_to IS NULL)
  AND (%(system)s::text IS NULL OR system = %(system)s)
  AND (%(check)s::text IS NULL OR check_name = %(check)s)
ORDER BY system, check_name, metric, params::text, valid_from
