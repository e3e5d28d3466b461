-- lane_pg schema version 21: the lock and limiter rows of job middleware (MW-3..6, MW-10).
--
-- lane.locks: one row per WithoutOverlapping key, naming the run that holds it (its job's
-- key and the lock token of its claim). The lock is free as soon as that run is over (the
-- job is no longer active under that token: completed, failed, retried, recovered after
-- its worker died), which lane.acquire_lock reads in the statement that takes the lock;
-- expires_at is only the backstop. A killed worker so never holds a key for longer than
-- its lease (Laravel's WithoutOverlapping held it forever without expireAfter).
--
-- lane.limiters: one row per RateLimited or ThrottlesExceptions key (the middleware
-- prefixes them, so the two never share a row): a fixed window's start and hits for the
-- rate limit; consecutive failures and the end of the current block for the throttle.

-- lane.locks of 0001 (key, owner, expires_at) was never written by any function: it is
-- replaced by the shape the middleware needs.
DROP TABLE lane.locks;
CREATE TABLE lane.locks (
    key text PRIMARY KEY,
    holder_key bigint NOT NULL,
    holder_queue text NOT NULL,
    holder_id text NOT NULL,
    holder_token uuid NOT NULL,
    acquired_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE TABLE lane.limiters (
    key text PRIMARY KEY,
    window_start timestamptz,
    hits integer NOT NULL DEFAULT 0,
    failures integer NOT NULL DEFAULT 0,
    blocked_until timestamptz,
    updated_at timestamptz NOT NULL
);
