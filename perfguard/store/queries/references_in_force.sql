-- A system's key-figure thresholds in force now, in matching_threshold()'s order of
-- precedence: what `perfguard run` hands its checks.
SELECT id, system, partition, environ, check_name, params, metric, point, reference, lower,
       upper, bounds, unit, direction, valid_from, valid_to, author, reason
FROM threshold_limit
WHERE system = %s AND point IS NULL
  AND valid_from <= now() AND (valid_to IS NULL OR valid_to > now())
ORDER BY specificity DESC, valid_from DESC, id DESC
