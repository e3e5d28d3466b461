-- lane_pg schema version 3: event recording per queue, and one index less per event row
-- (docs/decisions.md). A queue records its events (ADD-9, CLAIM-1, FIN-1, ...) unless
-- lane.set_queue_events(queue, false) turned it off; existing queues keep recording.

ALTER TABLE lane.queues ADD COLUMN record_events boolean NOT NULL DEFAULT true;

-- Every read (lane.read_events) and trim (lane.trim_events) is per queue: the primary key
-- becomes (queue, id) and replaces both the key on id and the (queue, id) index.
ALTER TABLE lane.events DROP CONSTRAINT events_pkey;
DROP INDEX lane.events_queue_idx;
ALTER TABLE lane.events ADD PRIMARY KEY (queue, id);
