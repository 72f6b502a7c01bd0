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
JOIN sample_block b ON b.run_id = r.id AND b.started_at = r.started_at
  AND b.check_name = 'HimenoCheck' AND tc.id = ANY(b.testcase_ids)
JOIN metric m ON m.id = b.metric_id AND m.name = 'mflops'
CROSS JOIN LATERAL unnest(b.point_ids, b.point_values[array_position(b.testcase_ids, tc.id)
                                                     :array_position(b.testcase_ids, tc.id)])
  AS s(point_id, value)
JOIN point pt ON pt.id = s.point_id AND pt.coords ? 'nodes'
LEFT JOIN key_verdict k ON k.run_id = tc.run_id AND k.testcase_id = tc.id
WHERE tc.run_id = (SELECT id FROM latest) AND tc.check_name = 'HimenoCheck'
GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3
