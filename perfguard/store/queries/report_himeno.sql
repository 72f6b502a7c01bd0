-- The run's Himeno MFLOPS at each (size, nodes, ranks): the scaling chart.
SELECT tc.params->>'size' AS size, (pt.coords->>'nodes')::int AS nodes,
       (pt.coords->>'ranks')::int AS ranks, s.value AS mflops
FROM judged_testcase tc
JOIN run r ON r.id = tc.run_id
JOIN sample s ON s.run_id = r.id AND s.started_at = r.started_at
             AND s.check_name = tc.check_name AND s.testcase_id = tc.id
JOIN metric m ON m.id = s.metric_id AND m.name = 'mflops'
JOIN point pt ON pt.id = s.point_id AND pt.coords ? 'nodes' AND pt.coords ? 'ranks'
WHERE tc.run_id = %s AND tc.check_name = 'HimenoCheck' AND tc.state = 'pass'
ORDER BY 1, 2, 3
