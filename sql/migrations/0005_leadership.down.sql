-- Undoes 0005_leadership.sql (Alembic downgrade to version 4): tables only, as every
-- .down.sql. The downgrade drops the schema's functions and views first and re-creates the
-- ones recorded for version 4 (downgrade_sql in lane_pg/postgres/schema/install.py).

DROP TABLE lane.leaders;
