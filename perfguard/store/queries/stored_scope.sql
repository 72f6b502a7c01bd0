-- What the stored runs know of a threshold's scope: whether the system has a run, the
-- checks of its newest 30 runs, and of the check's test cases in the newest 30 runs of the system that ran it, their
-- parameters and their metrics with the unit each is stored in (the newest where a
-- metric changed unit), which a threshold given in another unit is converted into.
WITH runs AS (
    SELECT r.id, r.started_at FROM run r JOIN system sy ON sy.id = r.system_id
    WHERE sy.name = %(system)s
      AND EXISTS (SELECT 1 FROM testcase tc
                  WHERE tc.run_id = r.id AND tc.check_name = %(check)s)
    ORDER BY r.started_at DESC LIMIT 30)
SELECT EXISTS (SELECT 1 FROM run r JOIN system sy ON sy.id = r.system_id
               WHERE sy.name = %(system)s) AS system_known,
       (SELECT coalesce(array_agg(DISTINCT tc.check_name), '{}') FROM testcase tc
        WHERE tc.run_id IN (SELECT r.id FROM run r JOIN system sy ON sy.id = r.system_id
                            WHERE sy.name = %(system)s
                            ORDER BY r.started_at DESC LIMIT 30)) AS checks,
       (SELECT coalesce(jsonb_agg(DISTINCT tc.params), '[]') FROM testcase tc
        WHERE tc.run_id IN (SELECT id FROM runs) AND tc.check_name = %(check)s) AS params,
       (SELECT coalesce(jsonb_object_agg(u.name, u.unit), '{}') FROM (
            SELECT DISTINCT ON (m.name) m.name, m.unit
            FROM sample_block b JOIN runs ON runs.id = b.run_id
                                       AND runs.started_at = b.started_at
            JOIN metric m ON m.id = b.metric_id
            WHERE b.check_name = %(check)s
            ORDER BY m.name, b.started_at DESC) u) AS metrics
