-- Least privilege: the role that owns the schema migrates it; nightly runs write through
-- perfguard_writer (rows only, no DDL); Grafana reads through perfguard_grafana.
-- perfguard_writer is a group (NOLOGIN): `perfguard db grant USER --writer` gives a
-- site's login role its rights. Created here only where the migrating role may create
-- roles; otherwise the DBA creates it first (docs/adopting.md) and this only grants.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'perfguard_writer') THEN
        CREATE ROLE perfguard_writer NOLOGIN;
    END IF;
END
$$;
-- Upkeep after an ingest or before a verdict needs the tables' owner; the writer calls it
-- through these functions, which run with the owner's rights and do nothing else.
CREATE FUNCTION summarize_new_samples() RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = public
    AS $$ SELECT brin_summarize_new_values('sample_testcase_brin') $$;
CREATE FUNCTION analyze_results() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$ BEGIN ANALYZE testcase, sample, point; END $$;
REVOKE ALL ON FUNCTION summarize_new_samples, analyze_results FROM PUBLIC;

GRANT USAGE ON SCHEMA public TO perfguard_writer;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO perfguard_writer;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO perfguard_writer;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO perfguard_writer;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO perfguard_writer;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO perfguard_writer;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT EXECUTE ON FUNCTIONS TO perfguard_writer;
