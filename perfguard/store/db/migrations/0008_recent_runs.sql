-- The runs a judgement reads: the newest `how_many` runs of the run's system, up to and
-- including it, that ran any of `checks`. History queries (verdict key figures, curves)
-- read series_value only for these runs, so judging a run costs the same after a year
-- of nightly runs as after a month.
CREATE FUNCTION recent_runs(p_run bigint, p_checks text[], p_how_many integer)
RETURNS SETOF bigint LANGUAGE sql STABLE AS $$
    SELECT r.id FROM run cur
    JOIN run r ON r.system_id = cur.system_id AND r.started_at <= cur.started_at
    WHERE cur.id = p_run
      AND EXISTS (SELECT 1 FROM testcase tc
                  WHERE tc.run_id = r.id AND tc.check_name = ANY(p_checks))
    ORDER BY r.started_at DESC, r.id DESC
    LIMIT p_how_many
$$;
GRANT EXECUTE ON FUNCTION recent_runs TO perfguard_grafana;
