-- lane_pg stored functions: the single source of the job-state rules.
--
-- Every public function is one state change, run in the caller's transaction (its own
-- when called alone), so a refused call writes nothing. Rule violations raise SQLSTATE
-- class LN through lane._fail; the codes are catalogued once, in lane_pg/errors.py
-- (tests/test_catalogues.py checks every code raised here is mapped and documented).
-- Times default to clock_timestamp() (the database clock); p_now is for tests and
-- explicit scheduling (SCH-7). Hot-path functions are plpgsql: DESIGN.md measured them
-- at parity with prepared SQL, while LANGUAGE sql data-modifying functions get generic
-- plans that scan the whole table.
--
-- Shared helpers: errors, named limits and states, order keys, queue rows, events, wake-ups,
-- token checks (an options document's are in 09_options.sql).

CREATE OR REPLACE FUNCTION lane._fail(p_code text, p_message text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = p_code, MESSAGE = p_message;
END $$;

-- Named limits, each written once. LANGUAGE sql IMMUTABLE, so the planner inlines the call
-- and folds it into a constant: a plpgsql statement using one caches a plan holding the
-- number, and pays nothing per call (EXPLAIN VERBOSE shows the literal). lane_pg.options
-- has the Python copies (tests/test_catalogues.py checks they are equal).

-- The longest duration in milliseconds (delays, timeouts, backoff delays, TTLs, retention
-- age, intervals): `n * interval '1 millisecond'` must fit an interval (int64 microseconds).
CREATE OR REPLACE FUNCTION lane._max_duration_ms()
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 9223372036854::bigint
$$;

-- The highest job priority (2^21); 0 is the highest precedence, this the lowest. Migration
-- 0001's CHECK on lane.jobs.priority repeats it (tests/test_catalogues.py compares them).
CREATE OR REPLACE FUNCTION lane._max_priority()
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 2097152
$$;

-- The largest `integer` (2^31 - 1): the bound of every count and value stored in an integer
-- column (attempts, retention count and limit, a series' limit, a rate limit's window), and
-- "no bound" where an integer count is optional.
CREATE OR REPLACE FUNCTION lane._max_int()
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 2147483647
$$;

-- The largest `bigint` (2^63 - 1): "no bound" for an optional bigint id range or count.
CREATE OR REPLACE FUNCTION lane._max_bigint()
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 9223372036854775807::bigint
$$;

-- The job states, in their documented order (lane._state_rank's): the one list in the
-- functions. Migration 0001's CHECK on lane.jobs.state repeats it (a table is never
-- re-created; tests/test_catalogues.py compares them with lane_pg.types.ALL_STATES).
CREATE OR REPLACE FUNCTION lane._job_states()
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY['waiting', 'delayed', 'active', 'waiting-children', 'completed', 'failed']
$$;

-- ORD-1..3: priority buckets of 2^41; LIFO below the middle (newest first), FIFO above
-- (oldest first). 2^40 sequence values per half outlast any realistic queue.
CREATE OR REPLACE FUNCTION lane._order_key(p_priority integer, p_lifo boolean, p_seq bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_priority::bigint * 2199023255552
         + CASE WHEN p_lifo THEN 1099511627776 - p_seq ELSE 1099511627776 + p_seq END
$$;

CREATE OR REPLACE FUNCTION lane._epoch_ms(p_ts timestamptz)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT floor(extract(epoch FROM p_ts) * 1000)::bigint
$$;

-- The options of a chain's catch job and of a batch's callback jobs that name none: retried
-- as a job class is by default (lane_pg.types.CHAIN_CATCH_RETRY, checked equal by
-- tests/conformance/test_chains.py and test_batches.py). With one attempt, a worker that
-- died running one spent it (attempts count deliveries) and the callback never ran.
CREATE OR REPLACE FUNCTION lane._callback_retry()
RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT '{"attempts": 3, "backoff": {"type": "exponential", "base_ms": 2000,
              "cap_ms": 300000, "jitter": 0.25}}'::jsonb
$$;

CREATE OR REPLACE FUNCTION lane._check_queue(p_queue text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_queue IS NULL OR p_queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$' THEN
        PERFORM lane._fail('LN013', format(
            'invalid queue name %L: use 1-128 characters from A-Z a-z 0-9 _ . : -, '
            'starting with a letter or digit', p_queue));
    END IF;
END $$;

-- Creates the queue row on first use; a read first so the common case writes nothing.
CREATE OR REPLACE FUNCTION lane._ensure_queue(p_queue text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM lane.queues WHERE name = p_queue) THEN
        PERFORM lane._check_queue(p_queue);
        INSERT INTO lane.queues (name, paused_all) VALUES (p_queue, lane._all_paused())
        ON CONFLICT DO NOTHING;
    END IF;
END $$;

-- The connection-wide pause a new queue row starts with (PAUSE-4, migration 0017). FOR
-- SHARE: lane.pause_all updates this row before it updates the queue rows, so a queue
-- created meanwhile either waits here and reads true, or is committed before pause_all's
-- UPDATE of lane.queues looks (each plpgsql statement takes a fresh snapshot).
CREATE OR REPLACE FUNCTION lane._all_paused()
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RETURN coalesce((SELECT s.value = 'true'::jsonb FROM lane.settings s
                      WHERE s.key = 'paused_all' FOR SHARE), false);
END $$;

-- plpgsql rather than LANGUAGE sql: called through PERFORM, a sql function is planned
-- again on every call (measured at ~39 us per event row in add_jobs); plpgsql caches it.
-- Writes nothing for a queue whose record_events is off (lane.set_queue_events); a queue
-- without a row records, as lane.get_queue_events says.
CREATE OR REPLACE FUNCTION lane._emit(p_queue text, p_event text, p_job_id text,
                                      p_data jsonb, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lane.events (queue, event, job_id, data, created_at)
    SELECT p_queue, p_event, p_job_id, p_data, p_now
     WHERE coalesce((SELECT q.record_events FROM lane.queues q WHERE q.name = p_queue), true);
END $$;

-- Wake idle claimers. The payload is only the queue name; NOTIFY is delivered at commit
-- and collapsed within a transaction, so a bulk add wakes once.
CREATE OR REPLACE FUNCTION lane._wake(p_queue text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('lane.jobs', p_queue);
END $$;

-- Wakes the queue's idle claimers for a job about to become due at p_due (a delayed add,
-- a retry with backoff, a reschedule, a move to delayed), but only when that can change
-- what a sleeping worker waits for. An idle worker sleeps until the earliest delayed job
-- of its queues (lane.next_due_in_ms) or its slow poll, so when another delayed job is
-- due after now and no later than p_due, every sleeper wakes by then anyway and sees
-- this one when it looks again: no NOTIFY (DESIGN.md: a pg_notify in every enqueue
-- commit halved concurrent enqueue). One range probe of jobs_delayed_idx. Call it before
-- the job itself is stored as delayed, so the probe never finds the job itself at p_due.
-- Left to the poll: a transaction that stays open past the other job's due time, whose
-- job the sleepers' next look cannot see yet (as for every NOTIFY, visible at commit).
CREATE OR REPLACE FUNCTION lane._wake_for_due(p_queue text, p_due timestamptz,
                                              p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM lane.jobs
                    WHERE queue = p_queue AND state = 'delayed'
                      AND available_at > p_now AND available_at <= p_due) THEN
        PERFORM lane._wake(p_queue);
    END IF;
END $$;

-- Where (queue, id) is stored (migration 0008): a generated id is its key's text, found
-- through the primary key; any other id (a custom id, which is never decimal, or a
-- generated id from before 0008) through jobs_custom_id_idx, whose predicate the second
-- branch repeats so the planner can use it. Gives each found input's position and key, in
-- no particular order. LANGUAGE sql so that it is inlined into its callers' plans.
CREATE OR REPLACE FUNCTION lane._job_keys(p_queues text[], p_ids text[])
RETURNS TABLE (ord bigint, key bigint) LANGUAGE sql STABLE AS $$
    SELECT i.ord, f.key
      FROM unnest(p_queues, p_ids) WITH ORDINALITY AS i(queue, id, ord)
     CROSS JOIN LATERAL (
           SELECT j.key FROM lane.jobs j
            WHERE j.key = CASE WHEN i.id ~ '^[1-9][0-9]{0,17}$' THEN i.id::bigint END
              AND j.queue = i.queue AND j.id = i.id
           UNION ALL
           SELECT j.key FROM lane.jobs j
            WHERE j.queue = i.queue AND j.id = i.id AND j.id <> j.key::text) f
$$;

-- The key of the job (p_queue, p_id), NULL when there is none.
CREATE OR REPLACE FUNCTION lane._find_key(p_queue text, p_id text)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_key bigint;
BEGIN
    SELECT k.key INTO v_key FROM lane._job_keys(ARRAY[p_queue], ARRAY[p_id]) k;
    RETURN v_key;
END $$;

-- The keys of the jobs held under the given tokens (active, token current), each found
-- through lane._job_keys, and locked in key order. Batched calls that touch the same jobs
-- (one worker's renewal and completion on two connections, say) then wait for each other
-- instead of deadlocking, and the lookup cost does not grow with the dead or finished rows
-- a scan of the active-jobs index would wade through.
CREATE OR REPLACE FUNCTION lane._lock_held(p_queues text[], p_ids text[], p_tokens uuid[])
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    v_found bigint[];
    v_tokens uuid[];
    v_keys bigint[];
BEGIN
    SELECT array_agg(k.key), array_agg(p_tokens[k.ord]) INTO v_found, v_tokens
      FROM lane._job_keys(p_queues, p_ids) k;
    -- `j.key = ANY (...)`: a primary-key lookup whatever the statistics say.
    v_keys := ARRAY(
        SELECT DISTINCT j.key
          FROM unnest(v_found, v_tokens) AS c(key, token)
          JOIN lane.jobs j ON j.key = c.key
         WHERE j.key = ANY (v_found) AND j.state = 'active' AND j.lock_token = c.token
         ORDER BY j.key);
    PERFORM 1 FROM lane.jobs WHERE key = ANY (v_keys) ORDER BY key FOR UPDATE;
    RETURN v_keys;
END $$;

CREATE OR REPLACE FUNCTION lane._job_key(p_queue text, p_id text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint;
BEGIN
    SELECT key INTO v_key FROM lane.jobs WHERE key = lane._find_key(p_queue, p_id) FOR UPDATE;
    IF v_key IS NULL THEN
        PERFORM lane._fail('LN004', format('job %s not found in queue %s', p_id, p_queue));
    END IF;
    RETURN v_key;
END $$;

-- The job row of an active job held under p_token, locked; LN004/LN005 otherwise
-- (CLAIM-4: a stale token changes nothing).
CREATE OR REPLACE FUNCTION lane._owned_job(p_queue text, p_id text, p_token uuid)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs;
BEGIN
    SELECT * INTO v_job FROM lane.jobs WHERE key = lane._find_key(p_queue, p_id) FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM lane._fail('LN004', format('job %s not found in queue %s', p_id, p_queue));
    END IF;
    IF v_job.state <> 'active' OR v_job.lock_token IS DISTINCT FROM p_token THEN
        PERFORM lane._fail('LN005', format(
            'lock mismatch for job %s in queue %s: the lease was lost (job is %s)',
            p_id, p_queue, v_job.state));
    END IF;
    RETURN v_job;
END $$;

-- The key of a job, locked, for a write that is either an administrator's (p_token NULL:
-- any retained job, LN004 when missing) or a run's (the job must be active under exactly
-- p_token, else LN005): a run whose lease ran out and was taken over, but which has not
-- been told yet, cannot overwrite the data, progress or logs of the run that owns the
-- job now.
CREATE OR REPLACE FUNCTION lane._writable_job_key(p_queue text, p_id text, p_token uuid)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs;
BEGIN
    IF p_token IS NULL THEN
        RETURN lane._job_key(p_queue, p_id);
    END IF;
    v_job := lane._owned_job(p_queue, p_id, p_token);
    RETURN v_job.key;
END $$;

CREATE OR REPLACE FUNCTION lane._check_states(p_states text[])
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_bad text;
    v_states text[] := lane._job_states();
BEGIN
    SELECT s INTO v_bad FROM unnest(p_states) s
    WHERE s IS NULL OR s <> ALL (v_states)
    LIMIT 1;
    IF FOUND THEN
        PERFORM lane._fail('LN003', format(
            'invalid job state %L: use %s or %s', v_bad,
            array_to_string(v_states[:cardinality(v_states) - 1], ', '),
            v_states[cardinality(v_states)]));
    END IF;
END $$;

-- Milliseconds to wait after failed attempt p_attempt (RETRY-1); mirrors Backoff.delay_for.
CREATE OR REPLACE FUNCTION lane._backoff_ms(p_backoff jsonb, p_attempt integer)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_type text := p_backoff ->> 'type';
    v_raw numeric;
    v_jitter double precision;
    v_delays jsonb;
BEGIN
    IF p_backoff IS NULL OR jsonb_typeof(p_backoff) = 'null' THEN
        RETURN 0;
    ELSIF v_type = 'fixed' THEN
        RETURN (p_backoff ->> 'delay_ms')::bigint;
    ELSIF v_type = 'sequence' THEN
        v_delays := p_backoff -> 'delays_ms';
        RETURN (v_delays ->> (least(greatest(p_attempt, 1), jsonb_array_length(v_delays)) - 1))::bigint;
    END IF;
    v_raw := (p_backoff ->> 'base_ms')::numeric * power(2::numeric, least(greatest(p_attempt, 1) - 1, 62));
    IF jsonb_typeof(p_backoff -> 'cap_ms') = 'number' THEN
        v_raw := least(v_raw, (p_backoff ->> 'cap_ms')::numeric);
    END IF;
    v_jitter := coalesce((p_backoff ->> 'jitter')::double precision, 0);
    IF v_jitter > 0 THEN
        v_raw := v_raw * (1 - v_jitter + 2 * v_jitter * random())::numeric;
    END IF;
    -- Bounded like every stored duration (lane_pg.options.MAX_DURATION_MS): an uncapped
    -- exponential overflowed the due time from about the 44th failure of a 1 s base, and
    -- the failure could then not be written at all.
    RETURN least(trunc(v_raw), lane._max_duration_ms())::bigint;
END $$;

-- True for a JSON integer literal (digits only: not 5.0, -1, "5" or true) in 0..p_max; false
-- for anything else, SQL NULL (an absent key) included. The CASE keeps the cast from ever
-- seeing a value that is not a number.
CREATE OR REPLACE FUNCTION lane._is_json_count(p_value jsonb, p_max numeric)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(p_value) = 'number' AND (p_value #>> '{}') ~ '^[0-9]+$'
                THEN (p_value #>> '{}')::numeric <= p_max
                ELSE false END
$$;

CREATE OR REPLACE FUNCTION lane._check_name(p_name text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_name IS NULL OR p_name = '' OR length(p_name) > 255 THEN
        PERFORM lane._fail('LN003', format('invalid job name %L: use 1-255 characters', p_name));
    END IF;
END $$;

CREATE OR REPLACE FUNCTION lane._state_rank(p_state text)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_position(lane._job_states(), p_state)
$$;
