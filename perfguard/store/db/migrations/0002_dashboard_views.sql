-- What the verdict and the Grafana dashboards read: one threshold-matching rule, in SQL.

-- Absolute limits of every threshold, whatever its bounds kind.
CREATE VIEW threshold_limit AS
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

-- Every key figure (a ReFrame perf variable) with the threshold valid when its run
-- started — the most specific one of its scope — and pass / fail / no-reference.
CREATE VIEW key_verdict AS
SELECT r.id AS run_id, r.started_at, r.trigger, r.labels, sy.name AS system,
       p.name AS partition, e.name AS environ, tc.id AS testcase_id, tc.check_name,
       tc.params, tc.result, tc.fail_reason, tc.nodelist, m.name AS metric, m.unit, s.value,
       th.id AS threshold_id, th.reference, th.lower, th.upper, th.bounds, th.direction,
       th.lower_limit, th.upper_limit,
       CASE WHEN th.id IS NULL THEN 'no-reference'
            WHEN (th.lower_limit IS NULL OR s.value >= th.lower_limit)
             AND (th.upper_limit IS NULL OR s.value <= th.upper_limit) THEN 'pass'
            ELSE 'fail' END AS status
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN testcase tc ON tc.run_id = r.id
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN sample s ON s.testcase_id = tc.id AND s.point_id = 0
JOIN metric m ON m.id = s.metric_id
LEFT JOIN LATERAL (
    SELECT t.* FROM threshold_limit t
    WHERE t.system = sy.name AND t.check_name = tc.check_name AND t.metric = m.name
      AND t.point IS NULL
      AND (t.partition IS NULL OR t.partition = p.name)
      AND (t.environ IS NULL OR t.environ = e.name)
      AND tc.params @> t.params
      AND t.valid_from <= r.started_at AND (t.valid_to IS NULL OR t.valid_to > r.started_at)
    ORDER BY t.specificity DESC, t.valid_from DESC
    LIMIT 1) th ON true;

-- Where a node's environment changed from its previous run: Grafana annotations.
CREATE VIEW fingerprint_change AS
SELECT r.started_at AS time, sy.name AS system, n.name AS node, r.id AS run_id,
       concat_ws('; ',
         CASE WHEN f.kernel IS DISTINCT FROM prev.kernel
              THEN 'kernel ' || coalesce(prev.kernel, '-') || ' → ' || coalesce(f.kernel, '-') END,
         CASE WHEN f.ofed IS DISTINCT FROM prev.ofed
              THEN 'OFED ' || coalesce(prev.ofed, '-') || ' → ' || coalesce(f.ofed, '-') END,
         CASE WHEN f.rdma_core IS DISTINCT FROM prev.rdma_core
              THEN 'rdma-core ' || coalesce(prev.rdma_core, '-') || ' → '
                   || coalesce(f.rdma_core, '-') END,
         CASE WHEN f.hcas IS DISTINCT FROM prev.hcas THEN 'HCA firmware/ports changed' END,
         CASE WHEN f.gpu_driver IS DISTINCT FROM prev.gpu_driver
              THEN 'GPU driver ' || coalesce(prev.gpu_driver, '-') || ' → '
                   || coalesce(f.gpu_driver, '-') END,
         CASE WHEN f.mpi IS DISTINCT FROM prev.mpi
              THEN 'MPI ' || coalesce(prev.mpi, '-') || ' → ' || coalesce(f.mpi, '-') END,
         CASE WHEN f.ucx IS DISTINCT FROM prev.ucx
              THEN 'UCX ' || coalesce(prev.ucx, '-') || ' → ' || coalesce(f.ucx, '-') END,
         CASE WHEN f.spack_lock_hash IS DISTINCT FROM prev.spack_lock_hash
              THEN 'Spack stack rebuilt' END) AS text
FROM fingerprint f
JOIN run r ON r.id = f.run_id
JOIN system sy ON sy.id = r.system_id
JOIN node n ON n.id = f.node_id
JOIN LATERAL (
    SELECT f2.* FROM fingerprint f2 JOIN run r2 ON r2.id = f2.run_id
    WHERE f2.node_id = f.node_id AND r2.started_at < r.started_at
    ORDER BY r2.started_at DESC LIMIT 1) prev ON true
WHERE (f.kernel, f.ofed, f.rdma_core, f.hcas, f.gpu_driver, f.mpi, f.ucx, f.spack_lock_hash)
      IS DISTINCT FROM
      (prev.kernel, prev.ofed, prev.rdma_core, prev.hcas, prev.gpu_driver, prev.mpi, prev.ucx,
       prev.spack_lock_hash);

CREATE INDEX fingerprint_node ON fingerprint (node_id);

-- Key figures that missed their threshold, counted when the run is ingested. Threshold
-- history is append-only (a change opens a new row from now on), so the count of a
-- stored run does not change later; the run history panel reads it instead of judging
-- every key figure of every run in view again.
ALTER TABLE run ADD COLUMN missed_thresholds integer;

-- Grafana reads through a role that can only SELECT. It is created without a
-- password; the admin sets one (ALTER ROLE perfguard_grafana PASSWORD '…') and puts it
-- in Grafana's environment as PERFGUARD_GRAFANA_PASSWORD (docs/grafana.md).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'perfguard_grafana') THEN
        CREATE ROLE perfguard_grafana LOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA public TO perfguard_grafana;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO perfguard_grafana;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO perfguard_grafana;
