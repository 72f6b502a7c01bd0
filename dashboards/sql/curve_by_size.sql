WITH latest AS (
  SELECT r.id AS run_id, r.started_at, row_number() OVER (ORDER BY r.started_at DESC) AS rank
  FROM run r JOIN system sy ON sy.id = r.system_id
  WHERE sy.name = '$system' AND $__timeFilter(r.started_at)
    AND EXISTS (SELECT 1 FROM testcase tc WHERE tc.run_id = r.id
                AND tc.check_name = '$check' AND tc.params::text = '$variant')
  ORDER BY r.started_at DESC LIMIT 2)
SELECT pt.size,
       max(s.value) FILTER (WHERE l.rank = 1) AS latest,
       max(s.value) FILTER (WHERE l.rank = 2) AS previous,
       max(th.reference) AS reference
FROM latest l
JOIN testcase tc ON tc.run_id = l.run_id AND tc.check_name = '$check'
  AND tc.params::text = '$variant'
JOIN sample_block b ON b.run_id = l.run_id AND b.started_at = l.started_at
  AND b.check_name = '$check' AND tc.id = ANY(b.testcase_ids)
JOIN metric m ON m.id = b.metric_id AND m.name = '$metric'
CROSS JOIN LATERAL unnest(b.point_ids, b.point_values[array_position(b.testcase_ids, tc.id)
                                                     :array_position(b.testcase_ids, tc.id)])
  AS s(point_id, value)
JOIN sized_point pt ON pt.id = s.point_id
LEFT JOIN threshold_limit th ON th.system = '$system' AND th.check_name = '$check'
  AND th.metric = '$metric' AND th.point = pt.coords AND th.valid_to IS NULL
GROUP BY 1 ORDER BY 1
