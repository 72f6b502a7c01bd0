-- One threshold-matching rule, in SQL: the run's references file, the CLI verdict and the
-- dashboards all choose with matching_threshold().

-- Absolute limits of every threshold, whatever its bounds kind.
CREATE OR REPLACE VIEW threshold_limit AS
SELECT t.*,
       CASE WHEN t.lower IS NULL THEN NULL
            WHEN t.bounds = 'absolute' THEN t.lower
            ELSE t.reference + abs(t.reference) * t.lower END AS lower_limit,
       CASE WHEN t.upper IS NULL THEN NULL
            WHEN t.bounds = 'absolute' THEN t.upper
            ELSE t.reference + abs(t.reference) * t.upper END AS upper_limit,
       (t.partition IS NOT NULL)::int + (t.environ IS NOT NULL)::int
         + (SELECT count(*) FROM jsonb_object_keys(t.params)) AS specificity
FROM threshold t;

-- The threshold that applies to one value: same system, check and metric, the same point
-- (NULL: a key figure), partition / environ / each variant parameter either unset or
-- equal, valid when the run started; the most specific wins, then the newest, then the
-- last one stored (a tie is decided, never left to row order).
CREATE OR REPLACE FUNCTION matching_threshold(
    p_system text, p_check text, p_metric text, p_point jsonb, p_partition text,
    p_environ text, p_params jsonb, p_at timestamptz)
RETURNS SETOF threshold_limit LANGUAGE sql STABLE AS $$
    SELECT t.* FROM threshold_limit t
    WHERE t.system = p_system AND t.check_name = p_check AND t.metric = p_metric
      AND t.point IS NOT DISTINCT FROM p_point
      AND (t.partition IS NULL OR t.partition = p_partition)
      AND (t.environ IS NULL OR t.environ = p_environ)
      AND p_params @> t.params
      AND t.valid_from <= p_at AND (t.valid_to IS NULL OR t.valid_to > p_at)
    ORDER BY t.specificity DESC, t.valid_from DESC, t.id DESC
    LIMIT 1
$$;

-- Pass or fail against the limits of the matched threshold (none matched: no-reference);
-- the key figures' view and the CLI's curve points both decide with it.
CREATE OR REPLACE FUNCTION threshold_status(
    value double precision, threshold_id bigint, lower_limit double precision,
    upper_limit double precision)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN threshold_id IS NULL THEN 'no-reference'
                WHEN (lower_limit IS NULL OR value >= lower_limit)
                 AND (upper_limit IS NULL OR value <= upper_limit) THEN 'pass'
                ELSE 'fail' END
$$;

-- Which way is better, as a reference's bounds say: a lower bound alone guards against
-- less (higher is better), an upper bound alone against more; both or none say nothing
-- (perfguard.contract.references.bounds_direction, the same rule for the checks).
CREATE OR REPLACE FUNCTION reference_direction(lower double precision,
                                               upper double precision)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN lower IS NOT NULL AND upper IS NULL THEN 'higher'
                WHEN upper IS NOT NULL AND lower IS NULL THEN 'lower' END
$$;

GRANT EXECUTE ON FUNCTION matching_threshold, threshold_status, reference_direction
    TO perfguard_grafana;
