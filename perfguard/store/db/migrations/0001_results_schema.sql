-- Results, fingerprints and thresholds: PostgreSQL is the single source of truth.

CREATE TABLE system (
    id          serial PRIMARY KEY,
    name        text NOT NULL UNIQUE
);

CREATE TABLE partition (
    id          serial PRIMARY KEY,
    system_id   integer NOT NULL REFERENCES system(id),
    name        text NOT NULL,
    UNIQUE (system_id, name)
);

CREATE TABLE environ (
    id          serial PRIMARY KEY,
    name        text NOT NULL UNIQUE
);

CREATE TABLE node (
    id          serial PRIMARY KEY,
    system_id   integer NOT NULL REFERENCES system(id),
    name        text NOT NULL,
    UNIQUE (system_id, name)
);

-- One ReFrame session.
CREATE TABLE run (
    id                bigserial PRIMARY KEY,
    session_uuid      uuid NOT NULL UNIQUE,
    system_id         integer NOT NULL REFERENCES system(id),
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz,
    reframe_version   text NOT NULL DEFAULT '',
    cmdline           text NOT NULL DEFAULT '',
    library_revision  text,
    trigger           text NOT NULL DEFAULT 'manual',
    labels            text[] NOT NULL DEFAULT '{}',
    hostname          text NOT NULL DEFAULT '',
    username          text NOT NULL DEFAULT '',
    report_path       text,
    ingested_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_system_started ON run (system_id, started_at);
CREATE INDEX run_labels ON run USING gin (labels);

-- One test case of a run: a check variant on a partition and programming environment.
CREATE TABLE testcase (
    id            bigint PRIMARY KEY,
    run_id        bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    check_name    text NOT NULL,
    unique_name   text NOT NULL,
    hashcode      text NOT NULL DEFAULT '',
    params        jsonb NOT NULL DEFAULT '{}',
    partition_id  integer NOT NULL REFERENCES partition(id),
    environ_id    integer NOT NULL REFERENCES environ(id),
    run_index     integer NOT NULL DEFAULT 0,
    result        text NOT NULL,
    fail_phase    text,
    fail_reason   text,
    slurm_jobid   text,
    nodelist      text[] NOT NULL DEFAULT '{}',
    job_exitcode  integer,
    time_total    double precision,
    UNIQUE (run_id, unique_name, partition_id, environ_id, run_index)
);
CREATE SEQUENCE testcase_id_seq OWNED BY testcase.id;
ALTER TABLE testcase ALTER COLUMN id SET DEFAULT nextval('testcase_id_seq');
CREATE INDEX testcase_check_run ON testcase (check_name, run_id);

CREATE TABLE metric (
    id      smallserial PRIMARY KEY,
    name    text NOT NULL,
    unit    text NOT NULL DEFAULT '',
    UNIQUE (name, unit)
);

-- Where on a curve or sweep a value was measured: {"size": 65536},
-- {"nodes": 2, "ranks_per_node": 24}. Few distinct points exist, so each is stored
-- once; point 0, '{}', marks a check's key figure (a ReFrame perf variable).
CREATE TABLE point (
    id      serial PRIMARY KEY,
    coords  jsonb NOT NULL UNIQUE
);
INSERT INTO point (id, coords) VALUES (0, '{}');

-- Every measured value; ref_* is what ReFrame itself compared a key figure to.
-- The largest table by far, kept narrow and trigger-free: ingest writes a test case
-- and its samples in one transaction, delete_run() removes both. Samples arrive in
-- test-case order (ids are drawn per ingest), so a BRIN index finds a test case's
-- curve at a fraction of a btree's insert cost (ingest summarizes the new ranges at
-- once: an unsummarized range matches every lookup); key figures get a partial btree.
CREATE TABLE sample (
    testcase_id  bigint NOT NULL,
    metric_id    smallint NOT NULL,
    point_id     integer NOT NULL,
    value        double precision NOT NULL,
    ref_value    double precision,
    ref_lower    double precision,
    ref_upper    double precision
);
CREATE INDEX sample_testcase_brin ON sample USING brin (testcase_id)
    WITH (pages_per_range = 16, autosummarize = on);
CREATE INDEX sample_key_figures ON sample (testcase_id, metric_id) INCLUDE (value)
    WHERE point_id = 0;

CREATE FUNCTION delete_run(target bigint) RETURNS void LANGUAGE sql AS $$
    DELETE FROM sample WHERE testcase_id IN (SELECT id FROM testcase WHERE run_id = target);
    DELETE FROM run WHERE id = target;
$$;

-- Environment fingerprint per node and run.
CREATE TABLE fingerprint (
    run_id           bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    node_id          integer NOT NULL REFERENCES node(id),
    collected_at     timestamptz,
    kernel           text,
    os               text,
    rdma_core        text,
    ofed             text,
    hcas             jsonb NOT NULL DEFAULT '[]',
    gpus             jsonb NOT NULL DEFAULT '[]',
    gpu_driver       text,
    mpi              text,
    ucx              text,
    spack_lock_hash  text,
    extra            jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, node_id)
);

-- Reference thresholds. A change closes the current row (valid_to) and opens a
-- new one: history is never overwritten. NULL partition/environ/point = any.
-- bounds 'fraction': lower/upper are signed fractions of reference (ReFrame's way);
-- bounds 'absolute': lower/upper are the limits themselves. NULL = unbounded.
CREATE TABLE threshold (
    id          bigserial PRIMARY KEY,
    system      text NOT NULL,
    partition   text,
    environ     text,
    check_name  text NOT NULL,
    params      jsonb NOT NULL DEFAULT '{}',
    metric      text NOT NULL,
    point       jsonb,
    reference   double precision NOT NULL,
    lower       double precision,
    upper       double precision,
    bounds      text NOT NULL DEFAULT 'fraction' CHECK (bounds IN ('fraction', 'absolute')),
    unit        text NOT NULL DEFAULT '',
    direction   text NOT NULL CHECK (direction IN ('higher', 'lower')),
    valid_from  timestamptz NOT NULL DEFAULT now(),
    valid_to    timestamptz,
    author      text NOT NULL,
    reason      text NOT NULL DEFAULT '',
    CHECK (valid_to IS NULL OR valid_to >= valid_from)
);
CREATE UNIQUE INDEX threshold_current_scope ON threshold (
    system, coalesce(partition, ''), coalesce(environ, ''), check_name, params, metric,
    coalesce(point, 'null'::jsonb)
) WHERE valid_to IS NULL;
CREATE INDEX threshold_lookup ON threshold (system, check_name, metric);
