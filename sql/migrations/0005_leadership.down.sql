-- Undoes 0005_leadership.sql (Alembic downgrade to version 4): tables only, as every
-- .down.sql. The downgrade drops the schema's functions and views first and re-creates the
-- ones recorded for version 4 (lane_pg/postgres/schema.py, downgrade_sql).

DROP TABLE lane.leaders;
