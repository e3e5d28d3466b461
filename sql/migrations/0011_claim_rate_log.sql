-- lane_pg schema version 11: claim rate limits as a sliding log (RATE-1..6, docs/decisions.md).
--
-- lane.rate_counters (a fixed window: window_start, count) never had a reader and is
-- replaced. A fixed window admits 2N claims across a window boundary (N at its end, N at
-- the next one's start), so "at most N claims in any window of the limit's length" cannot
-- be promised with it. lane.claim_log keeps one row per claim statement that took jobs
-- from a rate-limited queue: its time, how many jobs, and the window it was admitted
-- under. A claim under a limit N per D admits k jobs only when the rows of the last D
-- plus k stay within N, so every window of length D holds at most N claimed jobs. Rows
-- older than their window are deleted by the next limited claim of the queue.
--
-- lane.queues.rate_blocked_until: rate_limit_claims_for (BullMQ's rateLimit()) blocks the
-- queue's claims until then; read in the claim's existing queue-row SELECT, no lock.

DROP TABLE lane.rate_counters;

CREATE TABLE lane.claim_log (
    queue      text NOT NULL,
    claimed_at timestamptz NOT NULL,
    jobs       integer NOT NULL CHECK (jobs > 0),
    window_ms  integer NOT NULL CHECK (window_ms > 0)
);
CREATE INDEX claim_log_queue_idx ON lane.claim_log (queue, claimed_at);

ALTER TABLE lane.queues ADD COLUMN rate_blocked_until timestamptz;
