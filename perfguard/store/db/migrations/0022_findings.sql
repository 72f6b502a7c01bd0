-- Findings: a run's moved lines grouped by the cause they share (perfguard.judge.findings),
-- and whether each pages under the family-wise control. A regression line fails the run
-- only through a paged finding; a threshold miss (fail) or a test case that did not run
-- to the end (test-failed) fails it as before. Older runs (paged unknown) keep their
-- meaning: every regression line counts.
CREATE TABLE finding (
    run_id      bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    ordinal     integer NOT NULL,
    kind        text NOT NULL,
    subject     text NOT NULL,
    summary     text NOT NULL,
    lines       integer NOT NULL,
    evidence    double precision NOT NULL,
    critical    double precision NOT NULL,
    change      double precision,
    confirmed   boolean NOT NULL,
    paged       boolean NOT NULL,
    environment text[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, ordinal)
);
GRANT SELECT ON finding TO perfguard_grafana;
GRANT SELECT, INSERT, UPDATE, DELETE ON finding TO perfguard_writer;

ALTER TABLE verdict_line ADD COLUMN paged boolean;
ALTER TABLE run ADD COLUMN paged_findings integer;

CREATE OR REPLACE FUNCTION summarize_run(p_run bigint) RETURNS void LANGUAGE sql AS $$
    UPDATE run SET (judged_lines, failing_lines, regressions, improvements, inconclusive,
                    measured, paged_findings) = (
        SELECT count(*),
               count(*) FILTER (WHERE failing_status(v.status)
                                  AND (v.status <> 'regression' OR v.paged IS NOT FALSE)),
               count(*) FILTER (WHERE v.status = 'regression'),
               count(*) FILTER (WHERE v.status = 'improvement'),
               count(*) FILTER (WHERE v.status = 'inconclusive'),
               count(DISTINCT (v.check_name, v.params::text, v.partition, v.environ))
                   FILTER (WHERE v.value IS NOT NULL),
               (SELECT count(*) FROM finding f WHERE f.run_id = p_run AND f.paged)
        FROM verdict_line v WHERE v.run_id = p_run),
      (passed, failed, skipped, expected_failures) = (
        SELECT count(*) FILTER (WHERE tc.state = 'pass'),
               count(*) FILTER (WHERE tc.state = 'test-failed'),
               count(*) FILTER (WHERE tc.state = 'skipped'),
               count(*) FILTER (WHERE tc.state = 'expected-failure')
        FROM judged_testcase tc WHERE tc.run_id = p_run)
    WHERE id = p_run;
$$;

-- A paged finding fails the run on its own: on the night a fingerprint change explains it,
-- its lines are not yet regressions.
CREATE OR REPLACE VIEW run_outcome AS
SELECT r.id AS run_id,
       coalesce(r.judged_lines, 0)::bigint AS judged_lines,
       coalesce(r.failing_lines, 0)::bigint AS failing_lines,
       coalesce(r.judged_lines, 0) = 0 OR r.failing_lines > 0
           OR coalesce(r.paged_findings, 0) > 0 AS failed,
       CASE WHEN coalesce(r.judged_lines, 0) = 0 THEN 'nothing of the run was judged'
            WHEN coalesce(r.paged_findings, 0) > 0
            THEN r.paged_findings || ' finding(s) paged: '
                 || (SELECT string_agg(f.subject, '; ' ORDER BY f.ordinal) FROM finding f
                     WHERE f.run_id = r.id AND f.paged)
                 || CASE WHEN r.failing_lines > 0
                         THEN '; ' || r.failing_lines || ' of ' || r.judged_lines
                              || ' lines failed, regressed or did not run to the end'
                         ELSE '' END
            WHEN r.failing_lines > 0
            THEN r.failing_lines || ' of ' || r.judged_lines
                 || ' lines failed, regressed or did not run to the end'
            WHEN too_little_measured(r.measured, r.skipped, r.measured_floor)
            THEN coalesce(r.measured, 0) || ' test case(s) measured, ' || r.skipped
                 || ' skipped: nothing was measured that could pass'
            WHEN coalesce(r.regressions, 0) > 0
            THEN 'no finding paged; ' || r.regressions || ' line(s) regressed below the '
                 || 'family-wise bar (verdict: findings)'
            ELSE 'no line failed or regressed' END AS why,
       CASE WHEN coalesce(r.judged_lines, 0) = 0 OR r.failing_lines > 0
                 OR coalesce(r.paged_findings, 0) > 0 THEN 'fail'
            WHEN too_little_measured(r.measured, r.skipped, r.measured_floor)
            THEN 'nothing-measured'
            ELSE 'pass' END AS outcome,
       coalesce(r.measured, 0) AS measured
FROM run r;
GRANT SELECT ON run_outcome TO perfguard_grafana;
