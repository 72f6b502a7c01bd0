-- A run's verdict is a record: stored as judged, never rewritten by a later ack, accept
-- or threshold. Each judgement of a run is a row here, with when, by whom and why (at
-- ingest, or an explicit `perfguard verdict RUN --rejudge`). The newest is the run's
-- verdict (verdict_line and finding hold its lines and findings); when a run is judged
-- again the lines and findings of the verdict it replaces are kept in the superseded_*
-- tables under that verdict's id, so what paged that night stays readable.
CREATE TABLE verdict (
    id         bigserial PRIMARY KEY,
    run_id     bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    judged_at  timestamptz NOT NULL DEFAULT now(),
    judged_by  text NOT NULL,
    rejudged   boolean NOT NULL DEFAULT false,
    -- run_outcome's outcome and why at the time (pass, fail, nothing-measured)
    outcome    text NOT NULL,
    why        text NOT NULL
);
CREATE INDEX verdict_run ON verdict (run_id, judged_at);

-- What a finding contains, line by line: each line's name, nodes and devices
-- ([["OsuPt2PtCheck … latency", "node1", "node2", "node1:lo", "node2:lo"], …]): what
-- `perfguard ack` may name and what an acknowledgement made later is matched against.
ALTER TABLE finding ADD COLUMN members jsonb;

CREATE TABLE superseded_verdict_line (
    verdict_id bigint NOT NULL REFERENCES verdict(id) ON DELETE CASCADE,
    LIKE verdict_line
);
CREATE INDEX superseded_verdict_line_verdict ON superseded_verdict_line (verdict_id);

CREATE TABLE superseded_finding (
    verdict_id bigint NOT NULL REFERENCES verdict(id) ON DELETE CASCADE,
    LIKE finding
);

