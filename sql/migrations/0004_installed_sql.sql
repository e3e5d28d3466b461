-- lane_pg schema version 4: the database records which functions and views it runs
-- (docs/decisions.md). Every migrate writes, for the schema version it installs at, the
-- fingerprint of the library's repeatable SQL (sql/functions/*.sql and sql/views.sql) and
-- the definitions the catalog then holds, with their fingerprint; PostgresBackend.connect
-- compares both with the library and the live catalog, and a downgrade re-creates the
-- definitions recorded for the version it goes back to.
-- The rows are written by lane_pg.postgres.schema (repeatable_install_sql, and
-- migration_sql's capture of a pre-version-4 release's functions); never by hand.

CREATE TABLE lane.installed_sql (
    version             integer PRIMARY KEY
                        REFERENCES lane.schema_version (version) ON DELETE CASCADE,
    -- sha256 of the library's repeatable files as shipped (unrendered), NULL for the
    -- functions of a release that recorded none (captured when this table was created).
    library_fingerprint text,
    -- md5 of the definitions below joined by newlines: what the catalog held afterwards.
    catalog_fingerprint text NOT NULL,
    -- One CREATE OR REPLACE statement per function, then per view, of the schema
    -- (pg_get_functiondef / pg_get_viewdef), in the order the fingerprint reads them.
    definitions         text[] NOT NULL,
    installed_at        timestamptz NOT NULL DEFAULT now()
);
