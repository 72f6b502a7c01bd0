-- The levels of the run's system in force when its verdict was judged and cleared since:
-- (id, cause, "new level from run N accepted by who on date: why", "cleared by who on
-- date").
SELECT a.id, a.subject,
       'new level from run ' || a.from_run || ' accepted by ' || a.who || ' on '
       || to_char(a.at, 'YYYY-MM-DD') || ': ' || a.reason,
       'cleared by ' || a.cleared_by || ' on ' || to_char(a.cleared_at, 'YYYY-MM-DD')
FROM accepted_level a JOIN run f ON f.id = a.from_run
JOIN run r ON r.id = %(run_id)s AND r.system_id = f.system_id AND f.started_at <= r.started_at
WHERE a.at <= %(since)s AND a.cleared_at > %(since)s
ORDER BY a.id
