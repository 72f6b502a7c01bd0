SELECT r.started_at AS "time", coalesce(r.blind_lines, 0) AS "blind lines"
FROM run r JOIN system sy ON sy.id = r.system_id
WHERE $__timeFilter(r.started_at) AND sy.name = '$system' AND r.judged_lines IS NOT NULL
ORDER BY r.started_at
