-- The passed test cases of the recent runs of the checks, each with its run's place among
-- them (1: the newest) and what makes one series of a check and metric: its variant
-- (0018: a digest of check and parameters), partition and environ; as flat arrays, one
-- element each, grouped into series by numpy (``_Cases``): grouped per series in
-- PostgreSQL a 100,000-line verdict's 1.65·10^6 test cases took 100,000 memory contexts.
WITH recent AS (
    SELECT id, started_at, place
    FROM unnest(%(runs)s::bigint[], %(times)s::timestamptz[])
         WITH ORDINALITY AS u(id, started_at, place))
SELECT array_agg(tc.id), array_agg(r.place), array_agg(tc.variant),
       array_agg(tc.partition_id::bigint), array_agg(tc.environ_id::bigint)
FROM recent r JOIN judged_testcase tc ON tc.run_id = r.id AND tc.state = 'pass'
WHERE tc.check_name = ANY(%(checks)s) AND tc.run_id = ANY(%(runs)s::bigint[])
  AND (%(variants)s::uuid[] IS NULL OR tc.variant = ANY(%(variants)s::uuid[]))
