-- The tables of perfguard's results: PostgreSQL is the single source of truth.
--
-- Version 24 is where the 24 migrations perfguard grew by (0001 results schema … 0024
-- accepted levels) were folded into this one: a database they brought to 0024 holds
-- these tables and is taken as at this version. Views and functions are not here: each
-- has one current definition in ../repeatable/, applied after the migrations and again
-- whenever its file changes. Later changes to tables are new numbered files.

-- Grafana reads through a role that can only SELECT; runs write through perfguard_writer
-- (rows only, no DDL). Both are created here only where the migrating role may create
-- roles; otherwise the DBA creates them first (docs/adopting.md) and this only grants.
-- perfguard_grafana is created without a password: the admin sets one (docs/grafana.md).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'perfguard_grafana') THEN
        CREATE ROLE perfguard_grafana LOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'perfguard_writer') THEN
        CREATE ROLE perfguard_writer NOLOGIN;
    END IF;
END
$$;
-- Grafana's panels are lookups of milliseconds; JIT compiling them cost up to a second
-- each. Where the migrating role may not alter the reader role, the DBA does it.
DO $$
BEGIN
    ALTER ROLE perfguard_grafana SET jit = off;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'ALTER ROLE perfguard_grafana SET jit = off is the DBA''s to run';
END
$$;
GRANT USAGE ON SCHEMA public TO perfguard_grafana, perfguard_writer;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO perfguard_grafana;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO perfguard_writer;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO perfguard_writer;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT EXECUTE ON FUNCTIONS TO perfguard_writer;
-- Both may ask whether the schema is current (the ledgers exist before this runs).
GRANT SELECT ON schema_migration, schema_repeatable TO perfguard_grafana, perfguard_writer;

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

-- One ReFrame session, and what its recorded verdict counted (summarize_run): the run
-- history panel and run_outcome read the counts instead of every line of every run.
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
    ingested_at       timestamptz NOT NULL DEFAULT now(),
    -- key figures that missed their threshold, counted at ingest (threshold history is
    -- append-only, so the count of a stored run does not change later)
    missed_thresholds integer,
    judged_lines      integer,
    failing_lines     integer,
    regressions       integer,
    improvements      integer,
    inconclusive      integer,
    passed            integer,
    failed            integer,
    skipped           integer,
    expected_failures integer,
    -- test cases with a key figure; too few of them (with skips) is 'nothing-measured'
    measured          integer,
    -- verdict_rules.yaml's run.min_measured_share when the verdict was recorded
    measured_floor    double precision NOT NULL DEFAULT 0,
    paged_findings    integer
);
CREATE INDEX run_system_started ON run (system_id, started_at);
CREATE INDEX run_labels ON run USING gin (labels);

-- One test case of a run: a check variant on a partition and programming environment.
-- `superseded` marks earlier attempts of a retried one (testcase_superseded, a trigger),
-- `variant` is the digest of check and parameters the judge groups its history by.
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
    superseded    boolean NOT NULL DEFAULT false,
    variant       uuid GENERATED ALWAYS AS (md5(check_name || ' ' || params::text)::uuid) STORED,
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

-- Which way is better, per check and metric, as the check declares it (its
-- `perfguard_better`): never guessed from a unit.
CREATE TABLE metric_direction (
    check_name  text NOT NULL,
    metric      text NOT NULL,
    better      text NOT NULL CHECK (better IN ('higher', 'lower')),
    PRIMARY KEY (check_name, metric)
);

-- Where on a curve or sweep a value was measured: {"size": 65536},
-- {"nodes": 2, "ranks_per_node": 24}. Few distinct points exist, so each is stored
-- once; point 0, '{}', marks a check's key figure (a ReFrame perf variable).
CREATE TABLE point (
    id      serial PRIMARY KEY,
    coords  jsonb NOT NULL UNIQUE
);
INSERT INTO point (id, coords) VALUES (0, '{}');

-- The months that exist, created ahead by ingest (ensure_sample_month) and dropped whole
-- by `perfguard db prune`, which records when (a report then says it cannot show them).
-- sample, curve and sample_block are partitioned by the month of their run's start, so a
-- year of a large centre's nightly runs is twelve tables each and a verdict reads the
-- month or two its history lies in.
CREATE TABLE sample_month (
    name        text PRIMARY KEY,
    starts      timestamptz NOT NULL UNIQUE,
    ends        timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    pruned_at   timestamptz
);

-- Every measured value; ref_* is what ReFrame itself compared a key figure to;
-- started_at is the run's start, the partition key that history queries bound. Samples
-- arrive run by run and in test-case order, so a BRIN index per month finds a run's
-- samples or a test case's curve at a fraction of a btree's insert cost (ingest
-- summarizes the new ranges at once); key figures get a btree led by the run's start.
CREATE TABLE sample (
    testcase_id  bigint NOT NULL,
    metric_id    smallint NOT NULL,
    point_id     integer NOT NULL,
    value        double precision NOT NULL,
    ref_value    double precision,
    ref_lower    double precision,
    ref_upper    double precision,
    started_at   timestamptz NOT NULL
) PARTITION BY RANGE (started_at);
CREATE INDEX sample_testcase_brin ON sample USING brin (started_at, testcase_id)
    WITH (pages_per_range = 16, autosummarize = on);
CREATE INDEX sample_key_figures ON sample (started_at, testcase_id, metric_id) INCLUDE (value)
    WHERE point_id = 0;

-- Each sweep of a test case once more, whole: its point ids and values in id order. The
-- message-size and Himeno panels read it with one btree lookup per test case.
CREATE TABLE curve (
    testcase_id   bigint NOT NULL,
    metric_id     smallint NOT NULL,
    started_at    timestamptz NOT NULL,
    point_ids     integer[] NOT NULL,
    point_values  double precision[] NOT NULL,
    CHECK (cardinality(point_ids) = cardinality(point_values))
) PARTITION BY RANGE (started_at);
CREATE INDEX curve_run ON curve (started_at, testcase_id);

-- The judge's copy: a run's values of one check, metric and point list as one block, its
-- test cases (rows) and their values (float8 big-endian, test cases × points); the key
-- figures are the blocks of the point list {0}. A verdict's history is a few thousand
-- rows read as they lie, split into series by numpy (judge/history.py).
CREATE TABLE sample_block (
    run_id        bigint NOT NULL,
    started_at    timestamptz NOT NULL,
    check_name    text NOT NULL,
    metric_id     smallint NOT NULL,
    point_ids     integer[] NOT NULL,
    testcase_ids  bigint[] NOT NULL,
    point_values  bytea NOT NULL,
    CHECK (octet_length(point_values)
           = 8 * cardinality(point_ids) * cardinality(testcase_ids))
) PARTITION BY RANGE (started_at);
CREATE INDEX sample_block_run ON sample_block (started_at, check_name);

-- Per-night rollups of every key-figure series (last attempts that passed): what the
-- trend panels read over long ranges, and what stays of a month once it is pruned.
-- Nights are UTC dates of the runs' starts. Ingest refreshes the nights of its run.
CREATE TABLE key_figure_night (
    system      text NOT NULL,
    check_name  text NOT NULL,
    params      jsonb NOT NULL,
    partition   text NOT NULL,
    environ     text NOT NULL,
    metric      text NOT NULL,
    unit        text NOT NULL,
    night       date NOT NULL,
    median      double precision NOT NULL,
    min         double precision NOT NULL,
    max         double precision NOT NULL,
    count       integer NOT NULL,
    PRIMARY KEY (system, check_name, metric, params, partition, environ, night)
);
CREATE INDEX key_figure_night_night ON key_figure_night (night);

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
CREATE INDEX fingerprint_node ON fingerprint (node_id);

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

-- Change points of key-figure series (E-Divisive, judge/changepoints.py), with what
-- changed in the nodes' environment at that run. Re-detection replaces a series' rows.
CREATE TABLE change_point (
    id           bigserial PRIMARY KEY,
    system       text NOT NULL,
    check_name   text NOT NULL,
    params       jsonb NOT NULL,
    partition    text NOT NULL,
    environ      text NOT NULL,
    metric       text NOT NULL,
    run_id       bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    before       double precision NOT NULL,
    after        double precision NOT NULL,
    change       double precision NOT NULL,
    better       text NOT NULL CHECK (better IN ('higher', 'lower')),
    environment  text NOT NULL DEFAULT '',
    detected_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX change_point_series ON change_point (system, check_name, metric);

-- Every line of a run's verdict as perfguard judged it (again by `perfguard verdict`:
-- its rows are replaced), with the history baseline and the threshold it used, and
-- whether its finding paged (NULL: judged before findings). Dashboards and reports read
-- states here and never judge on their own.
CREATE TABLE verdict_line (
    run_id      bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    check_name  text NOT NULL,
    params      jsonb NOT NULL,
    partition   text NOT NULL,
    environ     text NOT NULL,
    -- '-' for a test case without figures; '<metric> curve' for a whole size sweep
    metric      text NOT NULL,
    point       jsonb NOT NULL DEFAULT '{}',
    value       double precision,
    unit        text NOT NULL DEFAULT '',
    status      text NOT NULL CHECK (status IN (
                    'pass', 'fail', 'regression', 'test-failed', 'improvement',
                    'inconclusive', 'no-reference', 'expected-failure', 'skipped')),
    -- the history baseline: median, noise (σ) and the band outside which a run is beyond
    centre      double precision,
    noise       double precision,
    band_low    double precision,
    band_high   double precision,
    detail      text NOT NULL DEFAULT '',
    judged_at   timestamptz NOT NULL DEFAULT now(),
    reference   double precision,
    lower_limit double precision,
    upper_limit double precision,
    better      text CHECK (better IN ('higher', 'lower')),
    paged       boolean,
    PRIMARY KEY (run_id, check_name, params, partition, environ, metric, point)
);
CREATE INDEX verdict_line_status ON verdict_line (status, run_id);

-- Findings: a run's moved lines grouped by the cause they share (judge/findings.py), and
-- whether each pages under the family-wise control; `acknowledged`: the reason of the
-- acknowledgement that kept it from paging.
CREATE TABLE finding (
    run_id       bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    ordinal      integer NOT NULL,
    kind         text NOT NULL,
    subject      text NOT NULL,
    summary      text NOT NULL,
    lines        integer NOT NULL,
    evidence     double precision NOT NULL,
    critical     double precision NOT NULL,
    change       double precision,
    confirmed    boolean NOT NULL,
    paged        boolean NOT NULL,
    environment  text[] NOT NULL DEFAULT '{}',
    acknowledged text,
    PRIMARY KEY (run_id, ordinal)
);

-- Acknowledged findings: "known, being fixed". A finding whose cause (its subject, e.g.
-- node37:mlx5_1) an admin acknowledged on the system stays visible and stops paging
-- until the acknowledgement is cleared; who, when and why are kept.
CREATE TABLE acknowledgement (
    id         serial PRIMARY KEY,
    system     text NOT NULL,
    subject    text NOT NULL,
    reason     text NOT NULL CHECK (reason <> ''),
    who        text NOT NULL DEFAULT session_user,
    at         timestamptz NOT NULL DEFAULT now(),
    cleared_at timestamptz,
    cleared_by text
);
CREATE UNIQUE INDEX acknowledgement_active ON acknowledgement (system, subject)
    WHERE cleared_at IS NULL;

-- Accepted levels: "this is the new level" after a planned change. The lines of the cause
-- (a node, node:device, a line's name, or '*' for every line of the system) are judged
-- against their history from the accepted run on.
CREATE TABLE accepted_level (
    id       serial PRIMARY KEY,
    subject  text NOT NULL,
    from_run bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    reason   text NOT NULL CHECK (reason <> ''),
    who      text NOT NULL DEFAULT session_user,
    at       timestamptz NOT NULL DEFAULT now()
);

-- What a fabric sweep (`perfguard sweep`) blamed, with its evidence. The pairs'
-- measurements themselves are samples of FabricSweepCheck, one point per (server,
-- client): the node × node matrix is drawn from those (the sweep_pair view).
CREATE TABLE sweep_finding (
    id        bigserial PRIMARY KEY,
    run_id    bigint NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    hca       text NOT NULL,
    kind      text NOT NULL CHECK (kind IN ('node', 'hca', 'link', 'leaf')),
    subject   text NOT NULL,
    evidence  text NOT NULL,
    drained   boolean NOT NULL DEFAULT false,
    found_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sweep_finding_run ON sweep_finding (run_id);
