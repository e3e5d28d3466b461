-- The current lane_pg tables: equal to applying every file of sql/migrations in order
-- (tests/postgres/test_migrations.py pins it). Edit a migration, then mirror it here.
-- Later behaviours add functions, not table reshapes.

CREATE SCHEMA IF NOT EXISTS lane;

CREATE TABLE lane.schema_version (
    version     integer PRIMARY KEY,
    breaking    boolean NOT NULL DEFAULT false,
    description text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- Generated job ids: one global sequence (DESIGN.md A5: a per-queue counter would
-- serialise every insert on the queue's row).
CREATE SEQUENCE lane.job_id_seq;
-- Every move into waiting takes the next value (ORD-2).
CREATE SEQUENCE lane.enqueue_seq;

CREATE TABLE lane.queues (
    name             text PRIMARY KEY,
    paused           boolean NOT NULL DEFAULT false,
    rate_max         integer CHECK (rate_max > 0),
    rate_duration_ms integer CHECK (rate_duration_ms > 0),
    max_active       integer CHECK (max_active > 0),
    max_events       integer NOT NULL DEFAULT 10000 CHECK (max_events >= 0),
    meta             jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- Finished jobs kept per state, newest first (lane.prune_finished, run by the workers'
    -- maintenance leader, deletes the rest); NULL keeps all (RET-1).
    keep_completed   integer DEFAULT 10000 CHECK (keep_completed >= 0),
    keep_failed      integer DEFAULT 100000 CHECK (keep_failed >= 0),
    -- Whether job transitions write lane.events rows (lane.set_queue_events); events
    -- already written stay readable when it is turned off.
    record_events    boolean NOT NULL DEFAULT true
);

CREATE TABLE lane.jobs (
    key              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue            text NOT NULL,
    id               text NOT NULL,
    name             text NOT NULL,
    data             jsonb NOT NULL DEFAULT 'null',
    state            text NOT NULL CHECK (state IN ('waiting', 'delayed', 'active',
                                                    'waiting-children', 'completed', 'failed')),
    priority         integer NOT NULL DEFAULT 0 CHECK (priority BETWEEN 0 AND 2097152),
    lifo             boolean NOT NULL DEFAULT false,
    -- priority * 2^41 + (2^40 - seq for LIFO | 2^40 + seq for FIFO); priority * 2^41 for a
    -- job released to the front (ORD-1..3).
    order_key        bigint NOT NULL DEFAULT 0,
    enqueued_seq     bigint,
    created_at       timestamptz NOT NULL,
    available_at     timestamptz NOT NULL,
    processed_at     timestamptz,
    finished_at      timestamptz,
    attempts_started integer NOT NULL DEFAULT 0,
    attempts_made    integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL DEFAULT 1 CHECK (max_attempts >= 1),
    backoff          jsonb,
    timeout_ms       bigint CHECK (timeout_ms >= 0),
    lock_token       uuid,
    worker_id        text,
    lease_expires_at timestamptz,
    stalled_count    integer NOT NULL DEFAULT 0,
    progress         jsonb,
    return_value     jsonb,
    failed_reason    text,
    stacktrace       text[] NOT NULL DEFAULT '{}',
    parent_queue     text,
    parent_id        text,
    deferred_failure text,
    dedup_id         text,
    repeat_key       text,
    batch_id         uuid,
    options          jsonb NOT NULL DEFAULT '{}',
    CONSTRAINT jobs_queue_id_key UNIQUE (queue, id)
) WITH (
    -- Every job row is updated several times in its life: leave room for HOT updates
    -- and vacuum the table eagerly so dead tuples do not pile up under load.
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02
);

-- The claim path reads only waiting rows, in claim order.
CREATE INDEX jobs_waiting_idx ON lane.jobs (queue, order_key, key) WHERE state = 'waiting';
-- The promotion path reads only delayed rows, by due time.
CREATE INDEX jobs_delayed_idx ON lane.jobs (queue, available_at, key) WHERE state = 'delayed';
-- Stalled recovery reads only active rows, by lease expiry.
CREATE INDEX jobs_lease_idx ON lane.jobs (lease_expires_at) WHERE state = 'active';
-- Retention and reports over finished rows (SQLR-6); `key` orders the jobs of one
-- completion batch that share finished_at, so the prune's cut-off is one index position.
CREATE INDEX jobs_finished_idx ON lane.jobs (queue, state, finished_at, key)
    WHERE state IN ('completed', 'failed');
-- Counts per queue and state (SQLR-6).
CREATE INDEX jobs_queue_state_idx ON lane.jobs (queue, state);
CREATE INDEX jobs_parent_idx ON lane.jobs (parent_queue, parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE lane.job_logs (
    job_key bigint NOT NULL,
    seq     bigint GENERATED ALWAYS AS IDENTITY,
    ts      timestamptz NOT NULL,
    message text NOT NULL,
    PRIMARY KEY (job_key, seq)
);

-- Parent <-> child dependencies of flows (FLOW-*), kept by parent so results survive
-- child cleanup (FLOW-28).
CREATE TABLE lane.flow_deps (
    parent_key  bigint NOT NULL,
    child_queue text NOT NULL,
    child_id    text NOT NULL,
    bucket      text NOT NULL CHECK (bucket IN ('unprocessed', 'processed', 'failed',
                                                'ignored', 'removed')),
    policy      text CHECK (policy IN ('fail', 'ignore', 'remove', 'continue', 'fail-deferred')),
    value       jsonb,
    reason      text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (parent_key, child_queue, child_id)
);
CREATE INDEX flow_deps_child_idx ON lane.flow_deps (child_queue, child_id);

-- Deduplication owners and unique locks (DEDUP-*, UNIQ-*): one row per live id.
CREATE TABLE lane.dedup_owners (
    queue      text NOT NULL,
    dedup_id   text NOT NULL,
    kind       text NOT NULL DEFAULT 'dedup' CHECK (kind IN ('dedup', 'unique')),
    job_id     text NOT NULL,
    expires_at timestamptz,
    keep_last  boolean NOT NULL DEFAULT false,
    next_job   jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, dedup_id)
);

-- Repeat series (REP-*): one row per key, naming the current owner occurrence.
CREATE TABLE lane.repeat_schedulers (
    queue       text NOT NULL,
    key         text NOT NULL,
    job_id      text,
    name        text NOT NULL,
    every_ms    bigint CHECK (every_ms > 0),
    pattern     text,
    limit_count integer CHECK (limit_count > 0),
    count       integer NOT NULL DEFAULT 0,
    start_at    timestamptz,
    end_at      timestamptz,
    next_at     timestamptz,
    template    jsonb NOT NULL DEFAULT '{}',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, key),
    CHECK ((every_ms IS NULL) <> (pattern IS NULL))
);

-- Retained per-queue event stream (EVS-*), trimmed to queues.max_events; written only for
-- queues whose record_events is on. Every read and trim is per queue, hence the key.
CREATE TABLE lane.events (
    id         bigint GENERATED ALWAYS AS IDENTITY,
    queue      text NOT NULL,
    event      text NOT NULL,
    job_id     text,
    data       jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL,
    PRIMARY KEY (queue, id)
);

-- Per-minute terminal counts (OBS-6).
CREATE TABLE lane.metrics (
    queue  text NOT NULL,
    state  text NOT NULL CHECK (state IN ('completed', 'failed')),
    minute timestamptz NOT NULL,
    count  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, state, minute)
);

-- Claim rate limiter windows (RATE-*).
CREATE TABLE lane.rate_counters (
    queue         text PRIMARY KEY,
    window_start  timestamptz NOT NULL,
    count         integer NOT NULL DEFAULT 0,
    blocked_until timestamptz
);

-- Queued batches (BATCH-*): counts are derived from settlements, never decremented.
CREATE TABLE lane.batches (
    id           uuid PRIMARY KEY,
    name         text NOT NULL DEFAULT '',
    total_jobs   integer NOT NULL DEFAULT 0,
    options      jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    cancelled_at timestamptz,
    finished_at  timestamptz
);

CREATE TABLE lane.batch_settlements (
    batch_id   uuid NOT NULL REFERENCES lane.batches (id) ON DELETE CASCADE,
    job_queue  text NOT NULL,
    job_id     text NOT NULL,
    outcome    text NOT NULL CHECK (outcome IN ('completed', 'failed')),
    settled_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (batch_id, job_queue, job_id)
);

-- The facade's failed-job store (FAIL-*), independent of job retention (RET-7).
CREATE TABLE lane.failed_jobs (
    id         uuid PRIMARY KEY,
    connection text NOT NULL DEFAULT 'default',
    queue      text NOT NULL,
    job_id     text NOT NULL,
    name       text NOT NULL,
    payload    jsonb NOT NULL,
    exception  text NOT NULL,
    failed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX failed_jobs_queue_idx ON lane.failed_jobs (queue, failed_at);

-- Worker heartbeats.
CREATE TABLE lane.workers (
    id           text PRIMARY KEY,
    hostname     text NOT NULL DEFAULT '',
    pid          integer,
    queues       text[] NOT NULL DEFAULT '{}',
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    meta         jsonb NOT NULL DEFAULT '{}'
);

-- Connection-wide switches: pause_all, restart signals (A8, A22).
CREATE TABLE lane.settings (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Owner-scoped expiring locks for the facade (unique, debounce, middleware).
CREATE TABLE lane.locks (
    key        text PRIMARY KEY,
    owner      text NOT NULL,
    expires_at timestamptz
);

-- Leadership leases (lane.acquire_leadership): the workers' maintenance leader holds the
-- 'maintenance' row and renews it; anyone takes it over once expires_at has passed.
CREATE TABLE lane.leaders (
    role       text PRIMARY KEY,
    holder     text NOT NULL,
    term       bigint NOT NULL DEFAULT 1,
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
