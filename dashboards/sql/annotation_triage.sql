SELECT f.started_at AS time,
       'accepted ' || a.subject || ' as the new level from run ' || a.from_run || ' (by ' || a.who || ' on ' || to_char(a.at, 'YYYY-MM-DD') || '): ' || a.reason
       || coalesce('; cleared by ' || a.cleared_by || ' on ' || to_char(a.cleared_at, 'YYYY-MM-DD'), '') AS text,
       'accept' AS tags
FROM accepted_level a JOIN run f ON f.id = a.from_run JOIN system s ON s.id = f.system_id
WHERE $__timeFilter(f.started_at) AND s.name = '$system'
UNION ALL
SELECT k.at, 'acknowledged ' || k.subject || ' (by ' || k.who || '): ' || k.reason
       || coalesce('; cleared by ' || k.cleared_by || ' on ' || to_char(k.cleared_at, 'YYYY-MM-DD'), ''),
       'ack'
FROM acknowledgement k
WHERE $__timeFilter(k.at) AND k.system = '$system'
ORDER BY 1
