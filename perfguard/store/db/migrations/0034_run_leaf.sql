-- The leaf switch each node hung off when a run was stored (Slurm's tree, `scontrol show
-- topology`; none where Slurm has no tree): the verdict takes each leaf's night apart from
-- the fabric's and its nodes' (perfguard/judge/findings.py, NightEffects) and names a
-- congested leaf. A run stored without it (`perfguard ingest`, a site without a tree) is
-- judged without leaves, as before.
CREATE TABLE run_leaf (
    run_id  bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    node    text NOT NULL,
    leaf    text NOT NULL,
    PRIMARY KEY (run_id, node)
);
