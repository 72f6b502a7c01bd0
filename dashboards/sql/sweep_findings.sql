SELECT r.started_at AS "time", f.run_id AS run, f.kind, f.subject, f.hca, f.drained, f.evidence
FROM sweep_finding f JOIN run r ON r.id = f.run_id JOIN system sy ON sy.id = r.system_id
WHERE $__timeFilter(r.started_at) AND sy.name = '$system'
ORDER BY 1 DESC, 3, 4
