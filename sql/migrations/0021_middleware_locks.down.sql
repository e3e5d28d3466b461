-- Undoes 0021_middleware_locks.sql: lane.locks goes back to the unused shape of 0001.

DROP TABLE lane.limiters;
DROP TABLE lane.locks;
CREATE TABLE lane.locks (
    key        text PRIMARY KEY,
    owner      text NOT NULL,
    expires_at timestamptz
);
