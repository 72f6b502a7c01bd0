-- The causes acknowledged on the run's system (and not cleared) → who, when, why.
SELECT a.subject, 'by ' || a.who || ' on ' || to_char(a.at, 'YYYY-MM-DD') || ': ' || a.reason
FROM acknowledgement a JOIN system sy ON sy.name = a.system JOIN run r ON r.system_id = sy.id
WHERE r.id = %s AND a.cleared_at IS NULL
