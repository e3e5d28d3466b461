-- Undoes 0014_failed_jobs.sql: tables only, as every .down.sql (0001's shape again).

DROP INDEX lane.failed_jobs_failed_at_idx;
ALTER TABLE lane.failed_jobs ALTER COLUMN failed_at SET DEFAULT now();
ALTER TABLE lane.failed_jobs ALTER COLUMN connection SET DEFAULT 'default';
ALTER TABLE lane.failed_jobs ADD COLUMN job_id text NOT NULL DEFAULT '';
UPDATE lane.failed_jobs SET job_id = coalesce(envelope_json ->> 'id', '');
ALTER TABLE lane.failed_jobs ALTER COLUMN job_id DROP DEFAULT;
ALTER TABLE lane.failed_jobs RENAME COLUMN envelope_json TO payload;
ALTER TABLE lane.failed_jobs RENAME COLUMN job_name TO name;
