-- Undoes 0006_state_indexes.sql: tables only, as every .down.sql.

DROP INDEX lane.jobs_waiting_children_idx;
CREATE INDEX jobs_queue_state_idx ON lane.jobs (queue, state);
