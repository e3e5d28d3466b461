-- lane_pg schema version 5: maintenance leadership as a lease in a table (docs/decisions.md),
-- and job-context writes fenced by the run's lock token.
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

-- update_job_data, update_job_progress and add_job_log take a last p_token argument
-- (NULL: an administrator's write, as before). A new parameter makes a new overload, and
-- two overloads make every call that relies on the defaults ambiguous: drop the old ones
-- (sql/functions/ creates the new ones right after the migrations).
DROP FUNCTION IF EXISTS lane.update_job_data(text, text, jsonb);
DROP FUNCTION IF EXISTS lane.update_job_progress(text, text, jsonb, timestamptz);
DROP FUNCTION IF EXISTS lane.add_job_log(text, text, text, integer, timestamptz);
