-- The open findings of a system, what `perfguard ack` may name: those of its runs in the
-- week up to its newest run, each cause once, from the newest run that found it.
SELECT DISTINCT ON (f.subject) f.subject, f.members, f.run_id, f.paged, f.acknowledged
FROM finding f JOIN run r ON r.id = f.run_id JOIN system s ON s.id = r.system_id
WHERE s.name = %(system)s
  AND r.started_at >= (SELECT max(n.started_at) FROM run n WHERE n.system_id = s.id)
                      - interval '7 days'
ORDER BY f.subject, r.started_at DESC
