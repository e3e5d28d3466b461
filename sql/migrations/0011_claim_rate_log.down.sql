-- Undoes 0011_claim_rate_log.sql: tables only, as every .down.sql. The claim log's rows
-- and any manual block are lost; configured limits (lane.queues) stay.

ALTER TABLE lane.queues DROP COLUMN rate_blocked_until;
DROP TABLE lane.claim_log;

CREATE TABLE lane.rate_counters (
    queue         text PRIMARY KEY,
    window_start  timestamptz NOT NULL,
    count         integer NOT NULL DEFAULT 0,
    blocked_until timestamptz
);
