-- Undoes 0003_queue_events.sql (Alembic downgrade to 0002): the column and the events keys
-- of version 2. Tables only: lane_pg.postgres.schema.downgrade_sql drops the functions and
-- views before this file runs and re-creates the ones recorded for version 2 after it.

ALTER TABLE lane.queues DROP COLUMN record_events;

ALTER TABLE lane.events DROP CONSTRAINT events_pkey;
ALTER TABLE lane.events ADD PRIMARY KEY (id);
CREATE INDEX events_queue_idx ON lane.events (queue, id);
