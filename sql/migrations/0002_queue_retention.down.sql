-- Undoes 0002_queue_retention.sql (Alembic downgrade to 0001): the retention functions
-- (they read the columns), the columns, and the three-column finished-jobs index.

DROP FUNCTION IF EXISTS lane.prune_finished(text[], integer);
DROP FUNCTION IF EXISTS lane.get_queue_retention(text);
DROP FUNCTION IF EXISTS lane.set_queue_retention(text, integer, integer);

ALTER TABLE lane.queues DROP COLUMN keep_completed, DROP COLUMN keep_failed;

DROP INDEX lane.jobs_finished_idx;
CREATE INDEX jobs_finished_idx ON lane.jobs (queue, state, finished_at)
    WHERE state IN ('completed', 'failed');
