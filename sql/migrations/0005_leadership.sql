-- lane_pg schema version 5: maintenance leadership as a lease in a table (docs/decisions.md).
-- The same release fences job-context writes with the run's lock token: update_job_data,
-- update_job_progress and add_job_log gain a last p_token argument, and migrate drops their
-- old overloads with every other function the files no longer define.
--
-- The leader used to be the holder of a session advisory lock on its LISTEN connection: a
-- leader frozen by SIGSTOP kept its session and its lock, and no other worker ran stalled
-- recovery, promotion, pruning or trimming. A lease with an expiry lapses when its holder
-- stops renewing it, whatever became of the holder's connections (lane.acquire_leadership).

CREATE TABLE lane.leaders (
    role       text PRIMARY KEY,
    holder     text NOT NULL,
    term       bigint NOT NULL DEFAULT 1,
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
