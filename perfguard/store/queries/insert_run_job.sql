-- One job of a run as sacct saw it (again: the newer reading wins).
INSERT INTO run_job (run_id, job_id, nodes, submitted_at, started_at, ended_at, elapsed_s,
                     state)
VALUES (%(run_id)s, %(job_id)s, %(nodes)s, %(submitted_at)s, %(started_at)s,
        %(ended_at)s, %(elapsed_s)s, %(state)s)
ON CONFLICT (run_id, job_id) DO UPDATE SET
    nodes = EXCLUDED.nodes, submitted_at = EXCLUDED.submitted_at,
    started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,
    elapsed_s = EXCLUDED.elapsed_s, state = EXCLUDED.state
