-- The levels of the run's system accepted after its verdict from a run up to it (and
-- not cleared): (id, cause, "new level from run N accepted by who on date: why").
SELECT a.id, a.subject,
       'new level from run ' || a.from_run || ' accepted by ' || a.who || ' on '
       || to_char(a.at, 'YYYY-MM-DD') || ': ' || a.reason
FROM accepted_level a JOIN run f ON f.id = a.from_run
JOIN run r ON r.id = %(run_id)s AND r.system_id = f.system_id AND f.started_at <= r.started_at
WHERE a.at > %(since)s AND a.cleared_at IS NULL
ORDER BY a.id
