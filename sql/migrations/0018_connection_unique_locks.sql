-- lane_pg schema version 18: unique locks per connection (UNIQ-1, A9).
--
-- A deduplication document with "kind": "unique" (the facade's push_unique) takes its id
-- across the whole schema (one connection's store), not per queue. Its dedup_owners row
-- keeps the queue of the job (or reservation) holding it, so every way from a job to its
-- owner row stays (queue, dedup_id, job_key); this partial index makes a second unique
-- row with the same id uncommittable, and lane._dedup_take and
-- lane.reserve_deduplication_key look a unique id up by the id alone.
--
-- kind said 'unique' for every row with a token (debounce windows too); it now says what
-- the add asked for. No job stored before this version asked, so the rows of jobs become
-- 'dedup' (per queue, as they were). Job-less reservations (only push_unique makes them)
-- stay 'unique'; of several with one id in different queues, the one expiring last stays.

UPDATE lane.dedup_owners SET kind = 'dedup' WHERE kind = 'unique' AND job_key IS NOT NULL;
DELETE FROM lane.dedup_owners o
 WHERE o.kind = 'unique'
   AND EXISTS (SELECT 1 FROM lane.dedup_owners p
                WHERE p.kind = 'unique' AND p.dedup_id = o.dedup_id
                  AND (coalesce(p.expires_at, 'infinity'), p.queue)
                      > (coalesce(o.expires_at, 'infinity'), o.queue));
CREATE UNIQUE INDEX dedup_owners_unique_id_idx ON lane.dedup_owners (dedup_id)
 WHERE kind = 'unique';
