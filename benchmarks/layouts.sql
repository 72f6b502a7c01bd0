-- The layout perfguard did not choose (issue 52, benchmarks/layouts.py): one row per run ×
-- test case × metric, the sweep's points and values as arrays, with the one index the
-- judge's read by run needs. Filled from the chosen layout's blocks (sample_block), so
-- both hold the same values.

-- name: create
CREATE TABLE per_testcase (
    run_id bigint NOT NULL,
    started_at timestamptz NOT NULL,
    testcase_id bigint NOT NULL,
    metric_id integer NOT NULL,
    point_ids integer[] NOT NULL,
    point_values float8[] NOT NULL
);
CREATE INDEX per_testcase_run ON per_testcase (run_id, metric_id);

-- name: fill
-- each block row by row: row i of the matrix is the values of test case testcase_ids[i]
INSERT INTO per_testcase (run_id, started_at, testcase_id, metric_id, point_ids, point_values)
SELECT b.run_id, b.started_at, b.testcase_ids[i], b.metric_id, b.point_ids,
       ARRAY(SELECT unnest(b.point_values[i:i][1:cardinality(b.point_ids)]))
FROM sample_block b, generate_subscripts(b.testcase_ids, 1) AS i
ORDER BY b.run_id, b.metric_id, b.testcase_ids[i];

-- name: curves_by_block
-- the judge's read of the recent runs' curves (store/queries/sample_blocks.sql's shape)
SELECT b.check_name, b.metric_id, b.point_ids, b.testcase_ids, b.point_values
FROM sample_block b
WHERE b.run_id = ANY(%(runs)s::bigint[]) AND b.point_ids <> '{0}'

-- name: curves_by_testcase
-- the same values from the per-test-case rows, their check from the test case
SELECT t.check_name, r.metric_id, r.point_ids, r.testcase_id, r.point_values
FROM per_testcase r JOIN testcase t ON t.id = r.testcase_id
WHERE r.run_id = ANY(%(runs)s::bigint[]) AND r.point_ids <> '{0}'

-- name: run_start
SELECT started_at FROM run WHERE id = %s

-- name: runs
SELECT id FROM run ORDER BY started_at

-- name: row_bytes
SELECT pg_total_relation_size('per_testcase')

-- name: blocks_of_run
SELECT check_name, metric_id, point_ids, testcase_ids, point_values
FROM sample_block WHERE run_id = %s

-- name: analyze
VACUUM (ANALYZE) sample_block, per_testcase, testcase
