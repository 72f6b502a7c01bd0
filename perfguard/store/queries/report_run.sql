-- The run a report is of, with its system's name.
SELECT r.id, r.started_at, r.finished_at, r.trigger, r.labels, r.report_path,
       r.reframe_version, sy.name AS system
FROM run r JOIN system sy ON sy.id = r.system_id WHERE r.id = %s
