-- What a run cost (issue 68): each Slurm job of the run as accounting (sacct) saw it,
-- written after the run is stored. Node-hours are elapsed × allocated nodes; the queue
-- wait is start − submit. The run_cost view (repeatable/70_cost.sql) sums them per run.
CREATE TABLE run_job (
    run_id        bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    job_id        text NOT NULL,
    nodes         integer NOT NULL CHECK (nodes >= 0),
    submitted_at  timestamptz,
    started_at    timestamptz,
    ended_at      timestamptz,
    elapsed_s     double precision NOT NULL CHECK (elapsed_s >= 0),
    state         text NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, job_id)
);
