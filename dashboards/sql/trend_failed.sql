SELECT r.started_at AS "time", v.value AS failed
FROM verdict_line v JOIN run r ON r.id = v.run_id JOIN system sy ON sy.id = r.system_id
WHERE $__timeFilter(r.started_at) AND sy.name = '$system' AND v.partition IN ($partition)
  AND v.check_name = '$check' AND v.metric = '$metric' AND v.point = '{}'
  AND failing_status(v.status) AND v.value IS NOT NULL
ORDER BY 1
