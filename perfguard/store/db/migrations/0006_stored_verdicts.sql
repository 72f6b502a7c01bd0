-- Every line of a run's verdict as perfguard judged it when the run was ingested (or
-- judged again by `perfguard verdict`): the threshold state and the history judgement
-- (perfguard/judge.py), with the baseline it used. Dashboards and reports read states
-- here and never judge on their own. Judging a run again replaces its rows.
CREATE TABLE verdict_line (
    run_id      bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    check_name  text NOT NULL,
    params      jsonb NOT NULL,
    partition   text NOT NULL,
    environ     text NOT NULL,
    -- '-' for a test case without figures; '<metric> curve' for a whole size sweep
    metric      text NOT NULL,
    point       jsonb NOT NULL DEFAULT '{}',
    value       double precision,
    unit        text NOT NULL DEFAULT '',
    status      text NOT NULL CHECK (status IN (
                    'pass', 'fail', 'regression', 'test-failed', 'improvement',
                    'inconclusive', 'no-reference', 'expected-failure', 'skipped')),
    -- the history baseline: median, noise (σ) and the band outside which a run is beyond
    centre      double precision,
    noise       double precision,
    band_low    double precision,
    band_high   double precision,
    detail      text NOT NULL DEFAULT '',
    judged_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, check_name, params, partition, environ, metric, point)
);
CREATE INDEX verdict_line_status ON verdict_line (status, run_id);

GRANT SELECT ON verdict_line TO perfguard_grafana;

-- Where the current fingerprint epoch of some nodes began: the latest run at or before
-- `at` where the environment of one of them changed (NULL: never changed). A rule with
-- `same_fingerprint` judges a run against the runs of its epoch only.
CREATE FUNCTION fingerprint_epoch(p_system text, p_nodes text[], p_at timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT max(c.time) FROM fingerprint_change c
    WHERE c.system = p_system AND c.node = ANY(p_nodes) AND c.time <= p_at
$$;
GRANT EXECUTE ON FUNCTION fingerprint_epoch TO perfguard_grafana;
