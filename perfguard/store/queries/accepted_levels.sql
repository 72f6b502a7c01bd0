-- The accepted levels of the judged run's system from runs up to it, oldest first:
-- (cause, from when, what the verdict says of it, when it was accepted, its id, when it
-- was cleared: NULL while in force).
SELECT a.subject, f.started_at,
       'new level from run ' || a.from_run || ' accepted by ' || a.who || ' on '
       || to_char(a.at, 'YYYY-MM-DD') || ': ' || a.reason, a.at, a.id, a.cleared_at
FROM accepted_level a JOIN run f ON f.id = a.from_run
JOIN run r ON r.id = %s AND r.system_id = f.system_id AND f.started_at <= r.started_at
ORDER BY f.started_at
