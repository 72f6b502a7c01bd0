-- Accepted levels: "this is the new level" after a planned change (an upgrade known to
-- cost 3 % of latency). The lines of the cause (a node, node:device, a line's name, or
-- '*' for every line of the system) are judged against their history from the accepted
-- run on; who, when and why are kept and shown with those lines.
CREATE TABLE accepted_level (
    id       serial PRIMARY KEY,
    subject  text NOT NULL,
    from_run bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    reason   text NOT NULL CHECK (reason <> ''),
    who      text NOT NULL DEFAULT session_user,
    at       timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON accepted_level TO perfguard_grafana;
GRANT SELECT, INSERT ON accepted_level TO perfguard_writer;
GRANT USAGE, SELECT ON SEQUENCE accepted_level_id_seq TO perfguard_writer;
