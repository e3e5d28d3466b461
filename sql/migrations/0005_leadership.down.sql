-- Undoes 0005_leadership.sql (Alembic downgrade to the previous revision): the leadership
-- table and the two functions that read it. The token-fenced update_job_data,
-- update_job_progress and add_job_log stay: their new last parameter defaults to NULL, so
-- every call an older library makes resolves to them with the old meaning.

DROP FUNCTION IF EXISTS lane.acquire_leadership(text, text, bigint, timestamptz);
DROP FUNCTION IF EXISTS lane.resign_leadership(text, text);
DROP TABLE lane.leaders;
