-- Acknowledged findings: "known, being fixed". A finding whose cause (its subject, e.g.
-- node37:mlx5_1) an admin acknowledged on the system stays visible and stops paging
-- until the acknowledgement is cleared; who, when and why are kept.
CREATE TABLE acknowledgement (
    id         serial PRIMARY KEY,
    system     text NOT NULL,
    subject    text NOT NULL,
    reason     text NOT NULL CHECK (reason <> ''),
    who        text NOT NULL DEFAULT session_user,
    at         timestamptz NOT NULL DEFAULT now(),
    cleared_at timestamptz,
    cleared_by text
);
CREATE UNIQUE INDEX acknowledgement_active ON acknowledgement (system, subject)
    WHERE cleared_at IS NULL;
ALTER TABLE finding ADD COLUMN acknowledged text;
GRANT SELECT ON acknowledgement TO perfguard_grafana;
GRANT SELECT, INSERT, UPDATE ON acknowledgement TO perfguard_writer;
GRANT USAGE, SELECT ON SEQUENCE acknowledgement_id_seq TO perfguard_writer;
