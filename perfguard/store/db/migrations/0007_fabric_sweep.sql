-- What a fabric sweep (`perfguard sweep`, perfguard/sweep.py) blamed, with its evidence.
-- The pairs' measurements themselves are samples of FabricSweepCheck, one point per
-- (server, client): the node × node matrix is drawn from those (sweep_pair below).
CREATE TABLE sweep_finding (
    id        bigserial PRIMARY KEY,
    run_id    bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    hca       text NOT NULL,
    kind      text NOT NULL CHECK (kind IN ('node', 'hca', 'link')),
    subject   text NOT NULL,
    evidence  text NOT NULL,
    drained   boolean NOT NULL DEFAULT false,
    found_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sweep_finding_run ON sweep_finding (run_id);

-- Every pair measurement of every sweep (loopback: server = client), with the HCA and
-- memory of its variant: the node × node matrix and each pair's history. A measurement
-- that failed is metric 'failed' with the test that failed (tag_bw, tag_lat).
CREATE VIEW sweep_pair AS
SELECT r.id AS run_id, r.started_at, sy.name AS system, tc.params->>'hca' AS hca,
       tc.params->>'memory' AS memory, pt.coords->>'server' AS server,
       pt.coords->>'client' AS client, m.name AS metric, m.unit, s.value,
       pt.coords->>'test' AS failed_test
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN judged_testcase tc ON tc.run_id = r.id AND tc.check_name = 'FabricSweepCheck'
JOIN sample s ON s.testcase_id = tc.id
JOIN metric m ON m.id = s.metric_id
JOIN point pt ON pt.id = s.point_id
WHERE pt.coords ? 'server';

GRANT SELECT ON sweep_finding, sweep_pair TO perfguard_grafana;
