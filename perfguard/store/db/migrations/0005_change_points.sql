-- Change points of key-figure series (E-Divisive, perfguard/changepoints.py), with what
-- changed in the nodes' environment at that run. Re-detection replaces a series' rows.
CREATE TABLE change_point (
    id           bigserial PRIMARY KEY,
    system       text NOT NULL,
    check_name   text NOT NULL,
    params       jsonb NOT NULL,
    partition    text NOT NULL,
    environ      text NOT NULL,
    metric       text NOT NULL,
    run_id       bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    before       double precision NOT NULL,
    after        double precision NOT NULL,
    change       double precision NOT NULL,
    better       text NOT NULL CHECK (better IN ('higher', 'lower')),
    environment  text NOT NULL DEFAULT '',
    detected_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX change_point_series ON change_point (system, check_name, metric);

-- Grafana annotations: one per change point, at its run's start.
CREATE VIEW change_point_annotation AS
SELECT r.started_at AS time, c.system,
       c.check_name || ' ' || c.metric || ' ' || to_char(c.change * 100, 'FMSG990.0') || ' %'
         || CASE WHEN c.environment <> '' THEN '; ' || c.environment ELSE '' END AS text,
       CASE WHEN (c.change < 0) = (c.better = 'higher') THEN 'regression' ELSE 'improvement'
       END AS kind
FROM change_point c JOIN run r ON r.id = c.run_id;

GRANT SELECT ON change_point, change_point_annotation TO perfguard_grafana;
