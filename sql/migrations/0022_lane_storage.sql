-- lane_pg schema version 22: the in-process lane scheduler's storage in PostgreSQL
-- (lane_pg.postgres.lane_storage.PostgresLaneStorage).
--
-- lane.lane_commands: the commands a LaneManager accepted and has not settled, so a
-- restarted manager resubmits them; lane.lane_dead_letters: its terminal failures, oldest
-- first by id. Both are keyed by a storage name, so several applications (or managers)
-- can share one database without recovering each other's commands.

CREATE TABLE lane.lane_commands (
    storage      text NOT NULL,
    command_id   text NOT NULL,
    lane_id      text NOT NULL,
    command_type text NOT NULL,
    payload      jsonb,
    submitted_at timestamptz NOT NULL,
    PRIMARY KEY (storage, command_id)
);

CREATE TABLE lane.lane_dead_letters (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    storage      text NOT NULL,
    lane_id      text NOT NULL,
    command_id   text NOT NULL,
    command_type text NOT NULL,
    error        text NOT NULL,
    attempts     integer NOT NULL,
    failed_at    timestamptz NOT NULL,
    payload      jsonb
);
CREATE INDEX lane_dead_letters_storage_idx ON lane.lane_dead_letters (storage, id);
