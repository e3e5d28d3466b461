-- lane_pg stored functions: Reporting access: a read-only role for the reporting views (SQLR-5).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- No migration creates a role (a managed database may refuse CREATE ROLE to the user
-- that migrates): an administrator calls this once, and again after an upgrade that adds
-- views. The views run with their owner's rights, so SELECT on them is all a reader
-- needs; the tables and the writing functions stay out of its reach (a stored function
-- runs with its caller's rights: lane.add_job as the reader fails on lane.jobs).

-- Creates p_role (NOLOGIN) unless it exists, and grants it USAGE on the schema and SELECT
-- on every v_* view of it, nothing else; returns the role's name. Idempotent. Give it to
-- a login role with GRANT lane_pg_reader TO grafana.
CREATE OR REPLACE FUNCTION lane.create_reader_role(p_role text DEFAULT 'lane_pg_reader')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_schema text;
    v_view text;
BEGIN
    IF coalesce(p_role, '') = '' THEN
        PERFORM lane._fail('LN003', 'a reader role needs a name');
    END IF;
    SELECT n.nspname INTO v_schema
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = 'lane.jobs'::regclass;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = p_role) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN', p_role);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', v_schema, p_role);
    FOR v_view IN
        SELECT c.relname FROM pg_catalog.pg_class c
          JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = v_schema AND c.relkind = 'v' AND c.relname LIKE 'v\_%'
         ORDER BY c.relname
    LOOP
        EXECUTE format('GRANT SELECT ON %I.%I TO %I', v_schema, v_view, p_role);
    END LOOP;
    RETURN p_role;
END $$;
