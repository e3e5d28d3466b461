-- lane_pg schema version 10: repeat series name their owner occurrence by key, and carry
-- their time zone (REP-*).
--
-- A series (one lane.repeat_schedulers row per queue and key) has at most one unfinished
-- occurrence, its owner; the unique partial index makes that a database fact: a second
-- live occurrence of one series cannot be committed, whatever raced. Only an add and a
-- retry can bring a row into the index (nothing else moves a job from finished to
-- unfinished), and both check the series first and refuse with a clear error, so no
-- promotion or claim can ever fail on it (Oban #1416). next_at holds the occurrence's
-- scheduled tick, the anchor of the next one; what a reader sees as the series' next run
-- is the owner's due time (lane.list_repeats).

ALTER TABLE lane.repeat_schedulers ADD COLUMN job_key bigint;
ALTER TABLE lane.repeat_schedulers ADD COLUMN tz text;
CREATE UNIQUE INDEX jobs_repeat_owner_idx ON lane.jobs (queue, repeat_key)
    WHERE repeat_key IS NOT NULL AND state NOT IN ('completed', 'failed');
