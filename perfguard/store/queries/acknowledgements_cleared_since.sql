-- The acknowledgements of the run's system in force when its verdict was judged and
-- cleared since: (id, cause, "by who on date"), shown under the findings they muted.
SELECT a.id, a.subject,
       'by ' || a.cleared_by || ' on ' || to_char(a.cleared_at, 'YYYY-MM-DD')
FROM acknowledgement a JOIN system sy ON sy.name = a.system JOIN run r ON r.system_id = sy.id
WHERE r.id = %(run_id)s AND a.at <= %(since)s AND a.cleared_at > %(since)s
ORDER BY a.id
