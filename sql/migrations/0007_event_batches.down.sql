-- Undoes 0007_event_batches.sql: tables only, as every .down.sql. Each batch becomes its
-- single rows again, with the ids lane.read_events gave them, and the id sequence goes on
-- above the highest of them.

INSERT INTO lane.events (id, queue, event, job_id, data, created_at)
OVERRIDING SYSTEM VALUE
SELECT e.id + s.k - 1, e.queue, e.event, s.job_id, coalesce(s.data, e.data), e.created_at
  FROM lane.events e
 CROSS JOIN LATERAL unnest(e.job_ids, e.datas) WITH ORDINALITY AS s(job_id, data, k)
 WHERE e.job_ids IS NOT NULL AND s.k > 1;
UPDATE lane.events e
   SET job_id = e.job_ids[1], data = coalesce(e.datas[1], e.data), job_ids = NULL, datas = NULL
 WHERE e.job_ids IS NOT NULL;
ALTER TABLE lane.events DROP CONSTRAINT events_batch_shape;
ALTER TABLE lane.events DROP COLUMN job_ids, DROP COLUMN datas;
ALTER TABLE lane.events ALTER COLUMN id SET INCREMENT BY 1;
SELECT setval(pg_get_serial_sequence('lane.events', 'id'),
              greatest((SELECT max(id) FROM lane.events),
                       (SELECT last_value FROM lane.events_id_seq)));
