SELECT k.started_at AS "time", min(k.lower_limit) AS lower_limit, max(k.upper_limit) AS upper_limit
FROM key_verdict k
WHERE $__timeFilter(k.started_at) AND k.system = '$system' AND k.partition IN ($partition)
  AND k.check_name = '$check' AND k.metric = '$metric' AND k.params::text = '$variant'
GROUP BY 1 ORDER BY 1
