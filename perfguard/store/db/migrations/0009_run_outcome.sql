-- One answer to "did this run fail?", read by `perfguard run`, `nightly`, `upgrade-check`,
-- `verdict`, `report` and Grafana alike: a run fails when a stored verdict line is a
-- fail, regression or test-failed, or when nothing of it was judged (ReFrame failed
-- before any test case was recorded). Skipped and expected-failure lines never fail it.
CREATE FUNCTION failing_status(p_status text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT p_status IN ('fail', 'regression', 'test-failed')
$$;
GRANT EXECUTE ON FUNCTION failing_status TO perfguard_grafana;

CREATE VIEW run_outcome AS
SELECT r.id AS run_id,
       count(v.run_id) AS judged_lines,
       count(v.run_id) FILTER (WHERE failing_status(v.status)) AS failing_lines,
       count(v.run_id) = 0 OR bool_or(failing_status(v.status)) AS failed,
       CASE WHEN count(v.run_id) = 0 THEN 'nothing of the run was judged'
            WHEN bool_or(failing_status(v.status))
            THEN count(v.run_id) FILTER (WHERE failing_status(v.status)) || ' of '
                 || count(v.run_id) || ' lines failed, regressed or did not run to the end'
            ELSE 'no line failed or regressed' END AS why
FROM run r LEFT JOIN verdict_line v ON v.run_id = r.id
GROUP BY r.id;
GRANT SELECT ON run_outcome TO perfguard_grafana;

-- The threshold each line was judged against travels with it, so a report reads the
-- stored verdict whole instead of judging the run again.
ALTER TABLE verdict_line
    ADD COLUMN reference   double precision,
    ADD COLUMN lower_limit double precision,
    ADD COLUMN upper_limit double precision,
    ADD COLUMN better      text CHECK (better IN ('higher', 'lower'));
