-- Undoes 0004_installed_sql.sql (Alembic downgrade to 0003). Tables only: the functions
-- and views are dropped and restored by lane_pg.postgres.schema.downgrade_sql.

DROP TABLE lane.installed_sql;
