-- What changed in the nodes' environment, for Grafana's annotations and the
-- `same_fingerprint` rule.

-- Where a node's environment changed from its previous run.
CREATE OR REPLACE VIEW fingerprint_change AS
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

-- Where the current fingerprint epoch of some nodes began: the latest run at or before
-- `at` where the environment of one of them changed (NULL: never changed). A rule with
-- `same_fingerprint` judges a run against the runs of its epoch only.
CREATE OR REPLACE FUNCTION fingerprint_epoch(p_system text, p_nodes text[], p_at timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT max(c.time) FROM fingerprint_change c
    WHERE c.system = p_system AND c.node = ANY(p_nodes) AND c.time <= p_at
$$;

-- One annotation per change point, at its run's start.
CREATE OR REPLACE VIEW change_point_annotation AS
SELECT r.started_at AS time, c.system,
       c.check_name || ' ' || c.metric || ' ' || to_char(c.change * 100, 'FMSG990.0') || ' %'
         || CASE WHEN c.environment <> '' THEN '; ' || c.environment ELSE '' END AS text,
       CASE WHEN (c.change < 0) = (c.better = 'higher') THEN 'regression' ELSE 'improvement'
       END AS kind
FROM change_point c JOIN run r ON r.id = c.run_id;

GRANT EXECUTE ON FUNCTION fingerprint_epoch TO perfguard_grafana;
