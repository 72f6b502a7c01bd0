-- Each node an upgrade check measured (issue 68): its verdict against its own level before
-- the upgrade and against its peers, what changed in its fingerprint and the figure that
-- failed with its own level. Batches of a rolling upgrade share a label, so
-- `perfguard upgrade-check --summary LABEL` lists every node's state; the run is the one
-- whose HTML report shows the node matrix.
CREATE TABLE upgrade_node (
    id            bigserial PRIMARY KEY,
    label         text NOT NULL DEFAULT '',
    node          text NOT NULL,
    run_id        bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    baseline_id   bigint REFERENCES run(id) ON DELETE SET NULL,
    passed        boolean NOT NULL,
    changed       text NOT NULL DEFAULT '',
    figure        text NOT NULL DEFAULT '',
    own_level     text NOT NULL DEFAULT '',
    drained       boolean NOT NULL DEFAULT false,
    resumed       boolean NOT NULL DEFAULT false,
    checked_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX upgrade_node_label ON upgrade_node (label, node, checked_at);
CREATE INDEX upgrade_node_run ON upgrade_node (run_id);
