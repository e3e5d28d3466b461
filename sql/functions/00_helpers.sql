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
-- Shared helpers: errors, order keys, queue rows, events, wake-ups, token checks, option checks.

CREATE OR REPLACE FUNCTION lane._fail(p_code text, p_message text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = p_code, MESSAGE = p_message;
END $$;

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
BEGIN
    SELECT s INTO v_bad FROM unnest(p_states) s
    WHERE s IS NULL OR s NOT IN ('waiting', 'delayed', 'active', 'waiting-children',
                                 'completed', 'failed')
    LIMIT 1;
    IF FOUND THEN
        PERFORM lane._fail('LN003', format(
            'invalid job state %L: use waiting, delayed, active, waiting-children, '
            'completed or failed', v_bad));
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
    RETURN least(trunc(v_raw), 9223372036854)::bigint;
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

-- Checks an options document before any write (ADD-8). lane_pg/options.py applies the same
-- rules in Python (tests/conformance/test_options_agree.py feeds both random documents);
-- change the two together. Keys are walked in jsonb order and the first bad one is
-- reported. Bounds: durations (delay_ms, timeout_ms, backoff delays, retention age_ms) at
-- most 9223372036854 ms, so `n * interval '1 millisecond'` fits; counts (attempts,
-- retention count and limit) at most 2147483647. A value beyond them used to be accepted
-- here and then broke the job's retry or completion ("interval out of range", "out of
-- range for type bigint"); a backoff object missing its delays was accepted as well (its
-- NULL checks were not false) and retried at once.
CREATE OR REPLACE FUNCTION lane._check_options(p_options jsonb)
RETURNS void LANGUAGE plpgsql STABLE AS $$  -- STABLE: lane._check_repeat reads the zone list
DECLARE
    v_key text;
    v_id text;
    v_value jsonb;
BEGIN
    IF jsonb_typeof(p_options) <> 'object' THEN
        PERFORM lane._fail('LN003', format('options must be a JSON object, got %s', p_options));
    END IF;
    FOR v_key, v_value IN SELECT key, value FROM jsonb_each(p_options) LOOP
        -- A JSON null means "not given", as for an absent key.
        CONTINUE WHEN jsonb_typeof(v_value) = 'null';
        CASE v_key
        WHEN 'job_id' THEN
            IF jsonb_typeof(v_value) <> 'string' THEN
                PERFORM lane._fail('LN001', format('job_id must be a string, got %s', v_value));
            END IF;
            v_id := v_value #>> '{}';
            IF v_id = '' OR length(v_id) > 255 THEN
                PERFORM lane._fail('LN001', format('invalid job id %L: use 1-255 characters', v_id));
            END IF;
            IF v_id = '0' OR v_id LIKE '0:%' OR v_id ~ '^[0-9]+$' THEN
                PERFORM lane._fail('LN001', format(
                    'invalid job id %L: custom ids may not be 0, start with ''0:'' or be a '
                    'pure integer (those are reserved for generated ids)', v_id));
            END IF;
        WHEN 'priority' THEN
            IF NOT lane._is_json_count(v_value, 2097152) THEN
                PERFORM lane._fail('LN002', format(
                    'priority must be an integer between 0 and 2097152, got %s', v_value));
            END IF;
        WHEN 'lifo' THEN
            IF jsonb_typeof(v_value) <> 'boolean' THEN
                PERFORM lane._fail('LN003', format('lifo must be true or false, got %s', v_value));
            END IF;
        WHEN 'delay_ms', 'timeout_ms' THEN
            IF NOT lane._is_json_count(v_value, 9223372036854) THEN
                PERFORM lane._fail('LN003', format(
                    '%s must be a non-negative integer number of milliseconds (at most '
                    '9223372036854), got %s', v_key, v_value));
            END IF;
        WHEN 'attempts' THEN
            IF NOT lane._is_json_count(v_value, 2147483647) OR v_value = '0'::jsonb THEN
                PERFORM lane._fail('LN003', format(
                    'attempts must be an integer >= 1 (at most 2147483647), got %s', v_value));
            END IF;
        WHEN 'backoff' THEN
            IF NOT (CASE WHEN jsonb_typeof(v_value) <> 'object' THEN false
                   ELSE CASE v_value ->> 'type'
                   WHEN 'fixed' THEN lane._is_json_count(v_value -> 'delay_ms', 9223372036854)
                   WHEN 'exponential' THEN
                        lane._is_json_count(v_value -> 'base_ms', 9223372036854)
                        AND (coalesce(jsonb_typeof(v_value -> 'cap_ms'), 'null') = 'null'
                             OR lane._is_json_count(v_value -> 'cap_ms', 9223372036854))
                        AND CASE WHEN NOT v_value ? 'jitter' THEN true
                                 WHEN jsonb_typeof(v_value -> 'jitter') <> 'number' THEN false
                                 ELSE (v_value ->> 'jitter')::numeric BETWEEN 0 AND 1 END
                   WHEN 'sequence' THEN
                        CASE WHEN jsonb_typeof(v_value -> 'delays_ms') IS DISTINCT FROM 'array'
                             THEN false
                             ELSE jsonb_array_length(v_value -> 'delays_ms') > 0
                                  AND NOT EXISTS (
                                      SELECT 1 FROM jsonb_array_elements(v_value -> 'delays_ms') d
                                       WHERE NOT lane._is_json_count(d, 9223372036854)) END
                   ELSE false END END)
            THEN
                PERFORM lane._fail('LN003', format(
                    'invalid backoff %s: use {"type": "fixed", "delay_ms": n}, '
                    '{"type": "exponential", "base_ms": n, "cap_ms": n, "jitter": 0..1} or '
                    '{"type": "sequence", "delays_ms": [n, ...]} with n in 0..9223372036854',
                    v_value));
            END IF;
        WHEN 'remove_on_complete', 'remove_on_fail' THEN
            IF NOT (CASE jsonb_typeof(v_value)
                   WHEN 'boolean' THEN true
                   WHEN 'number' THEN lane._is_json_count(v_value, 2147483647)
                   WHEN 'object' THEN NOT EXISTS (
                        SELECT 1 FROM jsonb_each(v_value) r
                         WHERE NOT CASE WHEN jsonb_typeof(r.value) = 'null'
                                             AND r.key IN ('age_ms', 'count', 'limit') THEN true
                                        WHEN r.key = 'age_ms'
                                        THEN lane._is_json_count(r.value, 9223372036854)
                                        WHEN r.key IN ('count', 'limit')
                                        THEN lane._is_json_count(r.value, 2147483647)
                                        ELSE false END)
                   ELSE false END)
            THEN
                PERFORM lane._fail('LN003', format(
                    '%s must be true, false, a count (0..2147483647), or '
                    '{"age_ms", "count", "limit"}, got %s', v_key, v_value));
            END IF;
        WHEN 'deduplication' THEN
            -- DEDUP-1..9: lane._dedup_take reads it. kind 'unique' (UNIQ-1, UNIQ-15,
            -- migration 0018): one lock per id in the connection, with a TTL, never
            -- replacing or keeping a duplicate (those act on a queue's own owner).
            IF NOT (CASE WHEN jsonb_typeof(v_value) <> 'object' THEN false
                   ELSE NOT EXISTS (SELECT 1 FROM jsonb_object_keys(v_value) k
                                     WHERE k NOT IN ('id', 'ttl_ms', 'extend_ttl',
                                                     'replace_delayed', 'keep_last_if_active',
                                                     'token', 'kind'))
                        AND jsonb_typeof(v_value -> 'id') IS NOT DISTINCT FROM 'string'
                        AND length(v_value ->> 'id') BETWEEN 1 AND 255
                        AND (coalesce(jsonb_typeof(v_value -> 'token'), 'null') = 'null'
                             OR jsonb_typeof(v_value -> 'token') = 'string'
                                AND length(v_value ->> 'token') BETWEEN 1 AND 255)
                        AND (coalesce(jsonb_typeof(v_value -> 'ttl_ms'), 'null') = 'null'
                             OR lane._is_json_count(v_value -> 'ttl_ms', 9223372036854)
                                AND v_value -> 'ttl_ms' <> '0'::jsonb)
                        AND NOT EXISTS (
                            SELECT 1 FROM unnest(ARRAY['extend_ttl', 'replace_delayed',
                                                       'keep_last_if_active']) f
                             WHERE coalesce(jsonb_typeof(v_value -> f), 'null')
                                   NOT IN ('null', 'boolean'))
                        AND NOT (v_value -> 'extend_ttl' IS NOT DISTINCT FROM 'true'::jsonb
                                 AND coalesce(jsonb_typeof(v_value -> 'ttl_ms'), 'null') = 'null')
                        AND coalesce(v_value -> 'kind', 'null'::jsonb)
                            IN ('null'::jsonb, '"dedup"'::jsonb, '"unique"'::jsonb)
                        AND NOT (v_value -> 'kind' IS NOT DISTINCT FROM '"unique"'::jsonb
                                 AND (coalesce(jsonb_typeof(v_value -> 'ttl_ms'), 'null') = 'null'
                                      OR v_value -> 'replace_delayed'
                                         IS NOT DISTINCT FROM 'true'::jsonb
                                      OR v_value -> 'keep_last_if_active'
                                         IS NOT DISTINCT FROM 'true'::jsonb))
                   END)
            THEN
                PERFORM lane._fail('LN003', format(
                    'invalid deduplication %s: use {"id": "1-255 characters", '
                    '"ttl_ms": 1..9223372036854, "extend_ttl": bool, "replace_delayed": bool, '
                    '"keep_last_if_active": bool, "token": "1-255 characters", '
                    '"kind": "dedup" | "unique"}; extend_ttl needs ttl_ms; kind "unique" '
                    'needs ttl_ms and takes neither replace_delayed nor keep_last_if_active',
                    v_value));
            END IF;
        WHEN 'repeat' THEN
            PERFORM lane._check_repeat(v_value);  -- REP-1, REP-5 (08_schedule.sql)
        WHEN 'fail_parent_on_failure', 'ignore_dependency_on_failure', 'remove_dependency_on_failure', 'continue_parent_on_failure' THEN
            -- FLOW-5..9: what a flow child's terminal failure does to its parent.
            IF jsonb_typeof(v_value) <> 'boolean' THEN
                PERFORM lane._fail('LN003', format('%s must be true or false, got %s',
                                                   v_key, v_value));
            END IF;
        WHEN 'fail_on_timeout' THEN
            -- RETRY-4 per job: the worker makes this job's timeout terminal.
            IF jsonb_typeof(v_value) <> 'boolean' THEN
                PERFORM lane._fail('LN003', format('fail_on_timeout must be true or false, got %s',
                                                   v_value));
            END IF;
        WHEN 'meta' THEN
            -- What a client stores beside the job and reads back, never interpreted here
            -- (the facade's envelope: connection label, unique and debounce tokens, context).
            IF jsonb_typeof(v_value) <> 'object' THEN
                PERFORM lane._fail('LN003', format('meta must be a JSON object, got %s', v_value));
            END IF;
        ELSE
            PERFORM lane._fail('LN003', format(
                'unknown option %L: known options are attempts, backoff, '
                'continue_parent_on_failure, deduplication, delay_ms, '
                'fail_on_timeout, fail_parent_on_failure, ignore_dependency_on_failure, '
                'job_id, lifo, meta, priority, remove_dependency_on_failure, '
                'remove_on_complete, remove_on_fail, repeat, timeout_ms', v_key));
        END CASE;
    END LOOP;
    IF (SELECT count(*) FROM unnest(ARRAY['fail_parent_on_failure',
                                          'ignore_dependency_on_failure',
                                          'remove_dependency_on_failure',
                                          'continue_parent_on_failure']) f
         WHERE p_options -> f = 'true'::jsonb) > 1 THEN
        PERFORM lane._fail('LN003',
            'a flow child takes at most one of fail_parent_on_failure, '
            'ignore_dependency_on_failure, remove_dependency_on_failure and '
            'continue_parent_on_failure');
    END IF;
    -- A series schedules its occurrences and names each (lane._repeat_take): no delay and
    -- no custom id of the caller's.
    IF jsonb_typeof(p_options -> 'repeat') = 'object'
       AND (coalesce(jsonb_typeof(p_options -> 'job_id'), 'null') <> 'null'
            OR coalesce(p_options -> 'delay_ms', '0'::jsonb) NOT IN ('0'::jsonb, 'null'::jsonb)) THEN
        PERFORM lane._fail('LN003',
            'repeat does not take job_id or delay_ms: every occurrence gets its own id, due '
            'when its schedule says');
    END IF;
END $$;

CREATE OR REPLACE FUNCTION lane._check_name(p_name text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_name IS NULL OR p_name = '' OR length(p_name) > 255 THEN
        PERFORM lane._fail('LN003', format('invalid job name %L: use 1-255 characters', p_name));
    END IF;
END $$;

CREATE OR REPLACE FUNCTION lane._state_rank(p_state text)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_position(ARRAY['waiting', 'delayed', 'active', 'waiting-children',
                                'completed', 'failed'], p_state)
$$;
