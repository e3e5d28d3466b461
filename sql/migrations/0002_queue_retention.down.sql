-- Undoes 0002_queue_retention.sql (Alembic downgrade to 0001): the columns and the
-- three-column finished-jobs index. Tables only: lane_pg.postgres.schema.downgrade_sql
-- drops the functions and views before this file runs and re-creates the ones recorded for
-- version 1 after it.

ALTER TABLE lane.queues DROP COLUMN keep_completed, DROP COLUMN keep_failed;

DROP INDEX lane.jobs_finished_idx;
CREATE INDEX jobs_finished_idx ON lane.jobs (queue, state, finished_at)
    WHERE state IN ('completed', 'failed');
