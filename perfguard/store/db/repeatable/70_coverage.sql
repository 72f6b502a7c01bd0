-- What runs cost and which nodes were measured when (issue 68): `perfguard verdict`, the
-- report, `perfguard nodes`, the budget nightly and Grafana read these.

-- A run's cost from its Slurm jobs (run_job, written from sacct after the run is stored):
-- node-hours = Σ elapsed × allocated nodes; queue wait = start − submit, summed over the
-- jobs and the longest. A run without accounting has no row.
CREATE OR REPLACE VIEW run_cost AS
SELECT j.run_id, count(*)::integer AS jobs,
       sum(j.nodes * j.elapsed_s) / 3600.0 AS node_hours,
       sum(greatest(0, extract(epoch FROM j.started_at - j.submitted_at)))::float8
           AS queue_wait_s,
       max(greatest(0, extract(epoch FROM j.started_at - j.submitted_at)))::float8
           AS longest_wait_s,
       bool_or(j.state LIKE 'TIMEOUT%') AS timed_out
FROM run_job j
GROUP BY j.run_id;

-- When each node, and each of its devices, was last measured: every judged test case
-- that ran in a Slurm job (passed or failed as a test; skipped, aborted and disturbed
-- ones measured nothing; the Spack stack's build, a fixture ReFrame runs on its own host
-- with a process id for a job id, measured no node) counts for
-- each node of its node list, and for the HCA it names (device '' where it names none:
-- the node as a whole). `per_node`: by the per-node checks (the
-- sweep's loopbacks, or a whole sweep), what the budget nightly rotates over.
CREATE OR REPLACE VIEW node_measured AS
SELECT sy.name AS system, node.name AS node,
       coalesce(nullif(tc.params->>'hca', 'auto'), '') AS device,
       tc.check_name = 'FabricSweepCheck' AS per_node,
       max(r.started_at) AS last_measured_at,
       (array_agg(r.id ORDER BY r.started_at DESC, r.id DESC))[1] AS last_run_id,
       count(DISTINCT r.id)::integer AS runs
FROM judged_testcase tc
JOIN run r ON r.id = tc.run_id
JOIN system sy ON sy.id = r.system_id
CROSS JOIN LATERAL unnest(tc.nodelist) AS node(name)
WHERE tc.state IN ('pass', 'test-failed') AND coalesce(tc.slurm_jobid, '') <> ''
  AND tc.check_name <> 'SpackStack'
GROUP BY 1, 2, 3, 4;

-- One row per node: last measured by any check, last by a per-node check, and the
-- devices measured with the oldest of their last measurements.
CREATE OR REPLACE VIEW node_coverage AS
SELECT system, node,
       max(last_measured_at) AS last_measured_at,
       max(last_measured_at) FILTER (WHERE per_node) AS last_per_node_at,
       (array_agg(last_run_id ORDER BY last_measured_at DESC))[1] AS last_run_id,
       array_agg(DISTINCT device ORDER BY device) FILTER (WHERE device <> '') AS devices,
       min(last_measured_at) FILTER (WHERE device <> '') AS oldest_device_at
FROM node_measured
GROUP BY system, node;
