-- lane_pg schema version 8: a generated job id is its key's text (docs/decisions.md).
--
-- Generated ids came from their own sequence, so every job took an entry in the unique
-- (queue, id) index, on insert and again on every state change (a change of state is no
-- HOT update). Custom ids are never decimal (ADD-4), so a generated id that is the key's
-- text is unique by the primary key alone: the unique index now holds only the ids that
-- are not their key's text, the custom ids and the generated ids of jobs added before
-- this migration. lane._job_keys finds a job by id through one index or the other.
-- Measured on 1,000-row unnest INSERTs into lane.jobs (medians of 9, interleaved): 5.9 ms
-- with the full index against 4.6 ms without it, of ~9 ms for a whole add_jobs_brief.
--
-- The key sequence restarts above every generated id handed out so far, so no new
-- generated id can equal an old one.

ALTER TABLE lane.jobs DROP CONSTRAINT jobs_queue_id_key;
CREATE UNIQUE INDEX jobs_custom_id_idx ON lane.jobs (queue, id) WHERE id <> key::text;
SELECT setval(pg_get_serial_sequence('lane.jobs', 'key'),
              greatest((SELECT last_value FROM lane.job_id_seq),
                       (SELECT last_value FROM lane.jobs_key_seq),
                       (SELECT max(key) FROM lane.jobs)));
DROP SEQUENCE lane.job_id_seq;
