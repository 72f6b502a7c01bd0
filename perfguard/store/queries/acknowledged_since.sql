-- The acknowledgements of the run's system made after its verdict (and not cleared):
-- (id, cause, "by who on date: why"), what `perfguard verdict RUN` shows over it.
SELECT a.id, a.subject,
       'by ' || a.who || ' on ' || to_char(a.at, 'YYYY-MM-DD') || ': ' || a.reason
FROM acknowledgement a JOIN system sy ON sy.name = a.system JOIN run r ON r.system_id = sy.id
WHERE r.id = %(run_id)s AND a.cleared_at IS NULL AND a.at > %(since)s
ORDER BY a.id
