WITH latest AS (
  SELECT r.id FROM run r JOIN system sy ON sy.id = r.system_id
  JOIN testcase tc ON tc.run_id = r.id AND tc.check_name = 'HimenoCheck'
  WHERE sy.name = '$system' AND $__timeFilter(r.started_at)
  ORDER BY r.started_at DESC LIMIT 1)
SELECT tc.params->>'size' AS size, (pt.coords->>'nodes')::int AS nodes,
       (pt.coords->>'ranks_per_node')::int AS ranks_per_node,
       (pt.coords->>'ranks')::int AS ranks, s.value AS mflops,
       max(k.value) FILTER (WHERE k.metric = 'speedup') AS speedup,
       max(k.value) FILTER (WHERE k.metric = 'efficiency') AS efficiency
FROM testcase tc
JOIN run r ON r.id = tc.run_id
JOIN curve cv ON cv.testcase_id = tc.id AND cv.started_at = r.started_at
JOIN metric m ON m.id = cv.metric_id AND m.name = 'mflops'
CROSS JOIN unnest(cv.point_ids, cv.point_values) AS s(point_id, value)
JOIN point pt ON pt.id = s.point_id AND pt.coords ? 'nodes'
LEFT JOIN key_verdict k ON k.testcase_id = tc.id
WHERE tc.run_id = (SELECT id FROM latest) AND tc.check_name = 'HimenoCheck'
GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3
