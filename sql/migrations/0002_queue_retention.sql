-- lane_pg schema version 2: a bounded default retention per queue (docs/decisions.md).
-- The workers' maintenance leader keeps the newest keep_completed completed and
-- keep_failed failed jobs of each queue (lane.prune_finished) and deletes the rest in
-- batches; NULL keeps every finished job (RET-1). Existing queues get the defaults.

ALTER TABLE lane.queues
    ADD COLUMN keep_completed integer DEFAULT 10000 CHECK (keep_completed >= 0),
    ADD COLUMN keep_failed    integer DEFAULT 100000 CHECK (keep_failed >= 0);

-- The prune finds its cut-off (the keep-th newest row) and the rows older than it in this
-- index; `key` orders the many jobs of one completion batch that share finished_at.
DROP INDEX lane.jobs_finished_idx;
CREATE INDEX jobs_finished_idx ON lane.jobs (queue, state, finished_at, key)
    WHERE state IN ('completed', 'failed');
