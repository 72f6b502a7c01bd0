-- Each value stored once (issue 52): the judge's blocks hold every value, as float8[]
-- matrices (test cases × points), and a key figure's reference as ReFrame compared it;
-- `sample` (a row per value) and `curve` (each sweep again, whole) go. Point-wise rows,
-- where a query wants them, are the views `key_figure` and `sample` (repeatable/
-- 30_sample_months.sql). A stored history is converted in place, one run at a time
-- (bounded memory): its old blocks were built from `sample` and `curve` and are built
-- again from them, as float8[] and with the references.
DROP TABLE sample_block;  -- built from sample and curve (0019): built again below
CREATE TABLE sample_block (
    run_id        bigint NOT NULL,
    started_at    timestamptz NOT NULL,
    check_name    text NOT NULL,
    metric_id     smallint NOT NULL,
    point_ids     integer[] NOT NULL,
    testcase_ids  bigint[] NOT NULL,
    point_values  double precision[] NOT NULL,
    -- a key figure's (point list {0}) reference and ReFrame's bounds, one per test case;
    -- NULL for a block none of whose test cases has one
    ref_values    double precision[],
    ref_lowers    double precision[],
    ref_uppers    double precision[],
    CHECK (array_ndims(point_values) = 2
           AND array_length(point_values, 1) = cardinality(testcase_ids)
           AND array_length(point_values, 2) = cardinality(point_ids))
) PARTITION BY RANGE (started_at);
-- The judge reads a run's blocks by run and check; prune drops whole months.
CREATE INDEX sample_block_run ON sample_block (run_id, check_name);

DO $$
DECLARE
    month record;
    suffix text;
    run record;
BEGIN
    FOR month IN SELECT * FROM sample_month WHERE pruned_at IS NULL ORDER BY starts LOOP
        suffix := substr(month.name, 7);
        EXECUTE format('CREATE TABLE %I PARTITION OF sample_block FOR VALUES FROM (%L) TO (%L)',
                       'sample_block' || suffix, month.starts, month.ends);
        FOR run IN SELECT id, started_at FROM run
                   WHERE started_at >= month.starts AND started_at < month.ends ORDER BY id LOOP
            INSERT INTO sample_block (run_id, started_at, check_name, metric_id, point_ids,
                                      testcase_ids, point_values, ref_values, ref_lowers,
                                      ref_uppers)
            SELECT run.id, run.started_at, s.check_name, s.metric_id, s.point_ids,
                   array_agg(s.testcase_id ORDER BY s.testcase_id),
                   array_agg(s.point_values ORDER BY s.testcase_id),
                   CASE WHEN bool_or(s.ref_value IS NOT NULL)
                        THEN array_agg(s.ref_value ORDER BY s.testcase_id) END,
                   CASE WHEN bool_or(s.ref_value IS NOT NULL)
                        THEN array_agg(s.ref_lower ORDER BY s.testcase_id) END,
                   CASE WHEN bool_or(s.ref_value IS NOT NULL)
                        THEN array_agg(s.ref_upper ORDER BY s.testcase_id) END
            FROM (SELECT tc.check_name, cv.metric_id, cv.testcase_id, cv.point_ids,
                         cv.point_values, NULL::float8 AS ref_value, NULL::float8 AS ref_lower,
                         NULL::float8 AS ref_upper
                  FROM testcase tc JOIN curve cv ON cv.testcase_id = tc.id
                                                AND cv.started_at = run.started_at
                  WHERE tc.run_id = run.id
                  UNION ALL
                  SELECT tc.check_name, k.metric_id, k.testcase_id, '{0}', ARRAY[k.value],
                         k.ref_value, k.ref_lower, k.ref_upper
                  FROM testcase tc JOIN sample k ON k.testcase_id = tc.id
                                                AND k.started_at = run.started_at
                                                AND k.point_id = 0
                  WHERE tc.run_id = run.id) s
            GROUP BY s.check_name, s.metric_id, s.point_ids;
        END LOOP;
    END LOOP;
END
$$;

DROP TABLE curve, sample CASCADE;  -- the views reading them: repeatable/
DROP FUNCTION IF EXISTS store_sample_blocks(bigint[]);
