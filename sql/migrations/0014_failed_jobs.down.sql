-- Undoes 0014_failed_jobs.sql: tables only, as every .down.sql. The table is built again in
-- 0001's shape (column order included) and the records copied over, the job id taken
-- back out of the envelope.

ALTER TABLE lane.failed_jobs RENAME TO failed_jobs_0014;
ALTER INDEX lane.failed_jobs_pkey RENAME TO failed_jobs_0014_pkey;
ALTER INDEX lane.failed_jobs_queue_idx RENAME TO failed_jobs_0014_queue_idx;
CREATE TABLE lane.failed_jobs (
    id         uuid PRIMARY KEY,
    connection text NOT NULL DEFAULT 'default',
    queue      text NOT NULL,
    job_id     text NOT NULL,
    name       text NOT NULL,
    payload    jsonb NOT NULL,
    exception  text NOT NULL,
    failed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX failed_jobs_queue_idx ON lane.failed_jobs (queue, failed_at);
INSERT INTO lane.failed_jobs (id, connection, queue, job_id, name, payload, exception, failed_at)
SELECT id, connection, queue, coalesce(envelope_json ->> 'id', ''), job_name, envelope_json,
       exception, failed_at
  FROM lane.failed_jobs_0014;
DROP TABLE lane.failed_jobs_0014;
