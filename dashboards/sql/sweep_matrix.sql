WITH last AS (
  SELECT max(p.run_id) AS id FROM sweep_pair p JOIN run r ON r.id = p.run_id
  WHERE p.system = '$system' AND r.trigger = 'sweep' AND NOT 'sweep-retest' = ANY(r.labels)
    AND $__timeFilter(r.started_at))
SELECT p.hca || CASE WHEN p.memory = 'host' THEN '' ELSE ' (' || p.memory || ')' END
         || ' ' || p.server AS server, p.client, p.value
FROM sweep_pair p JOIN last ON p.run_id = last.id
WHERE p.metric = '$metric'
UNION ALL
SELECT p.hca || CASE WHEN p.memory = 'host' THEN '' ELSE ' (' || p.memory || ')' END
         || ' ' || p.client, p.server, p.value
FROM sweep_pair p JOIN last ON p.run_id = last.id
WHERE p.metric = '$metric' AND p.server <> p.client
ORDER BY 1, 2
