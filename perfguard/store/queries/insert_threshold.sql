-- A threshold, in force from now.
INSERT INTO threshold (system, partition, environ, check_name, params, metric, point, reference,
                       lower, upper, bounds, unit, direction, author, reason)
VALUES (%(system)s, %(partition)s, %(environ)s, %(check)s, %(params)s, %(metric)s, %(point)s,
        %(reference)s, %(lower)s, %(upper)s, %(bounds)s, %(unit)s, %(direction)s, %(author)s,
        %(reason)s)
RETURNING id, system, partition, environ, check_name, params, metric, point, reference, lower,
       upper, bounds, unit, direction, valid_from, valid_to, author, reason
