-- The recent runs' blocks of values (0019; since 0027 every value's one copy, float8[]
-- matrices): the key figures' (the point list {0}) or the curves'. Grouping the same
-- values into series in PostgreSQL took 1.4 of a 2.6 s
-- 4,000-line verdict (396,000 rows of `curve`) and 4.5 of an 11.5 s 100,000-line one
-- (3.3·10^6 key figures of `sample`) at 2·10^7 samples.
SELECT b.check_name, b.metric_id, b.point_ids, b.testcase_ids, b.point_values
FROM sample_block b
WHERE b.started_at = ANY(%(times)s) AND b.run_id = ANY(%(runs)s::bigint[])
  AND b.check_name = ANY(%(checks)s) AND (b.point_ids = '{0}') = %(key_figures)s
