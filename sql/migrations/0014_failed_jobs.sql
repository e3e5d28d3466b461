-- lane_pg schema version 14: the failed-job store (FAIL-1, A4). Migration 0001 created
-- lane.failed_jobs ahead of any code writing it; this gives it the store's shape: job_name,
-- envelope_json (the whole job record: queue, id, name, data, options with options.meta,
-- attempts, reason, stacktrace, so a record can be pushed again after its row is gone; the
-- job id lives there, so job_id goes) and the (failed_at, id) index the keyset pages and
-- the `before` cut-offs read. Rows are kept (a psql user's own rows keep their payload).
--
-- One row per terminal failure recorded by lane.fail_jobs (the worker's settlement, when
-- its failed store is this database: same transaction as the terminal transition), by
-- stalled recovery and flow failures of typed jobs, or by lane.log_failed_job
-- (sql/functions/32_failed.sql). Independent of lane.jobs: retention of the failed job row
-- (remove_on_fail, pruning) leaves its record (RET-7).

ALTER TABLE lane.failed_jobs RENAME COLUMN name TO job_name;
ALTER TABLE lane.failed_jobs RENAME COLUMN payload TO envelope_json;
ALTER TABLE lane.failed_jobs DROP COLUMN job_id;
ALTER TABLE lane.failed_jobs ALTER COLUMN connection DROP DEFAULT;
ALTER TABLE lane.failed_jobs ALTER COLUMN failed_at DROP DEFAULT;
CREATE INDEX failed_jobs_failed_at_idx ON lane.failed_jobs (failed_at, id);
