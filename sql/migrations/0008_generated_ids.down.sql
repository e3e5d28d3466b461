-- Undoes 0008_generated_ids.sql: tables only, as every .down.sql. Generated ids come from
-- lane.job_id_seq again, which starts above every key (and so every id that is one).

CREATE SEQUENCE lane.job_id_seq;
SELECT setval('lane.job_id_seq',
              greatest((SELECT last_value FROM lane.jobs_key_seq),
                       (SELECT max(key) FROM lane.jobs)));
DROP INDEX lane.jobs_custom_id_idx;
ALTER TABLE lane.jobs ADD CONSTRAINT jobs_queue_id_key UNIQUE (queue, id);
