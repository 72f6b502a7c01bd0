-- A block's values are stored as they are, never compressed: measured values do not
-- compress (the recorded real nights: not one block of 1,493 smaller by PostgreSQL's pglz,
-- 9.9 B a curve value), and pglz tried on each large block before giving up, 17 of the
-- 48 ms the COPY of a 250,000-value report took (benchmarks/ingest.py). Large blocks
-- still move out of line (EXTERNAL); the test case ids, sequential, keep compressing.
-- Partitions take the setting from the table (new months too).
ALTER TABLE sample_block ALTER COLUMN point_values SET STORAGE EXTERNAL;
