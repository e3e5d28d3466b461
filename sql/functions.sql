-- lane_pg stored functions: the single source of the job-state rules.
--
-- Every public function is one state change, run in the caller's transaction (its own
-- when called alone), so a refused call writes nothing. Rule violations raise SQLSTATE
-- class LN (lane_pg/errors.py maps them): LN000 validation, LN001 invalid job id,
-- LN002 invalid priority, LN003 invalid options, LN004 job not found, LN005 lock
-- mismatch, LN006 state conflict, LN007 job locked, LN013 invalid queue name.
-- Times default to clock_timestamp() (the database clock); p_now is for tests and
-- explicit scheduling (SCH-7). Hot-path functions are plpgsql: DESIGN.md measured them
-- at parity with prepared SQL, while LANGUAGE sql data-modifying functions get generic
-- plans that scan the whole table.

-- ------------------------------------------------------------------ helpers

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
        INSERT INTO lane.queues (name) VALUES (p_queue) ON CONFLICT DO NOTHING;
    END IF;
END $$;

-- plpgsql rather than LANGUAGE sql: called through PERFORM, a sql function is planned
-- again on every call (measured at ~39 us per event row in add_jobs); plpgsql caches it.
-- Writes nothing for a queue whose record_events is off (lane.set_queue_events); a queue
-- without a row records, as lane.queue_records_events says.
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

-- The keys of the jobs held under the given tokens (active, token current), each found
-- through its (queue, id) index entry, and locked in key order. Batched calls that touch
-- the same jobs (one worker's renewal and completion on two connections, say) then wait
-- for each other instead of deadlocking, and the lookup cost does not grow with the dead
-- or finished rows a scan of the active-jobs index would wade through.
CREATE OR REPLACE FUNCTION lane._lock_held(p_queues text[], p_ids text[], p_tokens uuid[])
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    v_keys bigint[];
BEGIN
    v_keys := ARRAY(
        SELECT DISTINCT f.key
          FROM unnest(p_queues, p_ids, p_tokens) AS i(queue, id, token)
          CROSS JOIN LATERAL (
              SELECT j.key FROM lane.jobs j
               WHERE j.queue = i.queue AND j.id = i.id
                 AND j.state = 'active' AND j.lock_token = i.token) f
         ORDER BY f.key);
    PERFORM 1 FROM lane.jobs WHERE key = ANY (v_keys) ORDER BY key FOR UPDATE;
    RETURN v_keys;
END $$;

CREATE OR REPLACE FUNCTION lane._job_key(p_queue text, p_id text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint;
BEGIN
    SELECT key INTO v_key FROM lane.jobs WHERE queue = p_queue AND id = p_id FOR UPDATE;
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
    SELECT * INTO v_job FROM lane.jobs WHERE queue = p_queue AND id = p_id FOR UPDATE;
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
    RETURN trunc(v_raw)::bigint;
END $$;

-- Checks an options document (the keys of types.OPTION_KEYS) before any write.
CREATE OR REPLACE FUNCTION lane._check_options(p_options jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_key text;
    v_id text;
    v_value jsonb;
    v_backoff jsonb;
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
            IF jsonb_typeof(v_value) <> 'number' OR (v_value #>> '{}') !~ '^[0-9]+$'
               OR (v_value #>> '{}')::numeric > 2097152 THEN
                PERFORM lane._fail('LN002', format(
                    'priority must be an integer between 0 and 2097152, got %s', v_value));
            END IF;
        WHEN 'lifo' THEN
            IF jsonb_typeof(v_value) <> 'boolean' THEN
                PERFORM lane._fail('LN003', format('lifo must be true or false, got %s', v_value));
            END IF;
        WHEN 'delay_ms', 'timeout_ms' THEN
            IF jsonb_typeof(v_value) <> 'number' OR (v_value #>> '{}') !~ '^[0-9]+$'
               OR (v_value #>> '{}')::numeric > 9223372036854 THEN
                PERFORM lane._fail('LN003', format(
                    '%s must be a non-negative integer number of milliseconds, got %s',
                    v_key, v_value));
            END IF;
        WHEN 'attempts' THEN
            IF jsonb_typeof(v_value) <> 'number' OR (v_value #>> '{}') !~ '^[0-9]+$'
               OR (v_value #>> '{}')::numeric NOT BETWEEN 1 AND 2147483647 THEN
                PERFORM lane._fail('LN003', format('attempts must be an integer >= 1, got %s', v_value));
            END IF;
        WHEN 'backoff' THEN
            v_backoff := v_value;
            IF jsonb_typeof(v_backoff) = 'null' THEN
                CONTINUE;
            END IF;
            IF jsonb_typeof(v_backoff) <> 'object' OR NOT (
                (v_backoff ->> 'type' = 'fixed'
                    AND jsonb_typeof(v_backoff -> 'delay_ms') = 'number'
                    AND (v_backoff ->> 'delay_ms') ~ '^[0-9]+$')
                OR (v_backoff ->> 'type' = 'exponential'
                    AND jsonb_typeof(v_backoff -> 'base_ms') = 'number'
                    AND (v_backoff ->> 'base_ms') ~ '^[0-9]+$'
                    AND coalesce(jsonb_typeof(v_backoff -> 'cap_ms'), 'null') IN ('null', 'number')
                    AND coalesce((v_backoff ->> 'cap_ms') ~ '^[0-9]+$', true)
                    AND coalesce(jsonb_typeof(v_backoff -> 'jitter'), 'number') = 'number'
                    AND coalesce((v_backoff ->> 'jitter')::numeric BETWEEN 0 AND 1, true))
                OR (v_backoff ->> 'type' = 'sequence'
                    AND jsonb_typeof(v_backoff -> 'delays_ms') = 'array'
                    AND jsonb_array_length(v_backoff -> 'delays_ms') > 0
                    AND NOT EXISTS (
                        SELECT 1 FROM jsonb_array_elements(v_backoff -> 'delays_ms') d
                        WHERE jsonb_typeof(d) <> 'number' OR (d #>> '{}') !~ '^[0-9]+$')))
            THEN
                PERFORM lane._fail('LN003', format(
                    'invalid backoff %s: use {"type": "fixed", "delay_ms": n}, '
                    '{"type": "exponential", "base_ms": n, "cap_ms": n, "jitter": 0..1} or '
                    '{"type": "sequence", "delays_ms": [n, ...]}', v_backoff));
            END IF;
        WHEN 'remove_on_complete', 'remove_on_fail' THEN
            IF NOT (jsonb_typeof(v_value) IN ('boolean', 'null')
                OR (jsonb_typeof(v_value) = 'number' AND (v_value #>> '{}') ~ '^[0-9]+$')
                OR (jsonb_typeof(v_value) = 'object' AND NOT EXISTS (
                        SELECT 1 FROM jsonb_each(v_value) r
                        WHERE r.key NOT IN ('age_ms', 'count', 'limit')
                           OR jsonb_typeof(r.value) NOT IN ('number', 'null')
                           OR (jsonb_typeof(r.value) = 'number'
                               AND (r.value #>> '{}') !~ '^[0-9]+$'))))
            THEN
                PERFORM lane._fail('LN003', format(
                    '%s must be true, false, a count, or {"age_ms", "count", "limit"}, got %s',
                    v_key, v_value));
            END IF;
        ELSE
            PERFORM lane._fail('LN003', format(
                'unknown option %L: known options are job_id, priority, lifo, delay_ms, '
                'attempts, backoff, timeout_ms, remove_on_complete, remove_on_fail', v_key));
        END CASE;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION lane._check_name(p_name text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_name IS NULL OR p_name = '' OR length(p_name) > 255 THEN
        PERFORM lane._fail('LN003', format('invalid job name %L: use 1-255 characters', p_name));
    END IF;
END $$;

-- Moves the given jobs (already locked by the caller) into waiting in array order, each
-- with a fresh enqueue sequence (ORD-2), writing `waiting {prev}` when p_prev is given
-- (for the jobs of queues that record events).
CREATE OR REPLACE FUNCTION lane._make_waiting(p_keys bigint[], p_prev text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_seqs bigint[];
BEGIN
    IF coalesce(cardinality(p_keys), 0) = 0 THEN
        RETURN;
    END IF;
    v_seqs := ARRAY(SELECT s FROM (SELECT nextval('lane.enqueue_seq') AS s
                                   FROM generate_series(1, cardinality(p_keys))) n ORDER BY s);
    UPDATE lane.jobs j
       SET state = 'waiting',
           enqueued_seq = u.seq,
           order_key = lane._order_key(j.priority, j.lifo, u.seq)
      FROM unnest(p_keys, v_seqs) AS u(key, seq)
     WHERE j.key = ANY (p_keys) AND j.key = u.key;
    IF p_prev IS NOT NULL THEN
        INSERT INTO lane.events (queue, event, job_id, data, created_at)
        SELECT j.queue, 'waiting', j.id, jsonb_build_object('prev', p_prev), p_now
          FROM unnest(p_keys) WITH ORDINALITY AS u(key, ord)
          JOIN lane.jobs j ON j.key = u.key
          LEFT JOIN lane.queues q ON q.name = j.queue
         WHERE j.key = ANY (p_keys) AND coalesce(q.record_events, true)
         ORDER BY u.ord;
    END IF;
END $$;

-- Promotes due delayed jobs of the given queues (all when NULL) in due order and wakes
-- their claimers unless p_wake is false. Returns how many moved.
CREATE OR REPLACE FUNCTION lane._promote_due(p_queues text[], p_now timestamptz,
                                             p_wake boolean DEFAULT true)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_keys bigint[];
    v_queue text;
BEGIN
    IF p_queues IS NULL THEN
        v_keys := ARRAY(SELECT key FROM lane.jobs
                         WHERE state = 'delayed' AND available_at <= p_now
                         ORDER BY available_at, key FOR UPDATE SKIP LOCKED);
    ELSE
        v_keys := ARRAY(SELECT key FROM lane.jobs
                         WHERE queue = ANY (p_queues) AND state = 'delayed'
                           AND available_at <= p_now
                         ORDER BY available_at, key FOR UPDATE SKIP LOCKED);
    END IF;
    IF cardinality(v_keys) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM lane._make_waiting(v_keys, 'delayed', p_now);
    IF p_wake THEN
        FOR v_queue IN SELECT DISTINCT queue FROM lane.jobs WHERE key = ANY (v_keys) LOOP
            PERFORM lane._wake(v_queue);
        END LOOP;
    END IF;
    RETURN cardinality(v_keys);
END $$;

-- RET-2/3: applies a finished job's retention policy to its queue and state.
CREATE OR REPLACE FUNCTION lane._apply_retention(p_queue text, p_state text, p_policy jsonb,
                                                 p_key bigint, p_times integer,
                                                 p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_doomed bigint[];
    v_count bigint;
BEGIN
    IF p_policy IS NULL OR p_policy IN ('false'::jsonb, 'null'::jsonb) THEN
        RETURN;
    END IF;
    IF p_policy = 'true'::jsonb THEN
        v_doomed := ARRAY[p_key];
    ELSE
        v_doomed := '{}';
        IF jsonb_typeof(p_policy) = 'object' AND p_policy ? 'age_ms' THEN
            v_doomed := ARRAY(
                SELECT key FROM lane.jobs
                 WHERE queue = p_queue AND state = p_state
                   AND finished_at < p_now - (p_policy ->> 'age_ms')::bigint * interval '1 millisecond'
                 ORDER BY finished_at, key
                 LIMIT CASE WHEN p_policy ? 'limit'
                            THEN (p_policy ->> 'limit')::bigint * greatest(p_times, 1) END);
        END IF;
        v_count := CASE jsonb_typeof(p_policy)
                       WHEN 'number' THEN (p_policy #>> '{}')::bigint
                       ELSE (p_policy ->> 'count')::bigint END;
        IF v_count IS NOT NULL THEN
            v_doomed := v_doomed || ARRAY(
                SELECT key FROM lane.jobs
                 WHERE queue = p_queue AND state = p_state AND key <> ALL (v_doomed)
                 ORDER BY finished_at DESC, key DESC
                OFFSET v_count);
        END IF;
    END IF;
    IF cardinality(v_doomed) > 0 THEN
        DELETE FROM lane.job_logs WHERE job_key = ANY (v_doomed);
        DELETE FROM lane.jobs WHERE key = ANY (v_doomed);
    END IF;
END $$;

-- FIN-7: `drained` when the queue has no waiting and no active job left.
CREATE OR REPLACE FUNCTION lane._drained_check(p_queue text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM lane.jobs WHERE queue = p_queue AND state = 'waiting')
       AND NOT EXISTS (SELECT 1 FROM lane.jobs WHERE queue = p_queue AND state = 'active') THEN
        PERFORM lane._emit(p_queue, 'drained', NULL, '{}', p_now);
    END IF;
END $$;

-- Terminal failure of one locked job (FIN-4, FIN-6, STALL-3): state, events, retention,
-- drained. p_prev is the state it leaves.
CREATE OR REPLACE FUNCTION lane._fail_terminal(p_key bigint, p_reason text, p_now timestamptz)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs;
    v_prev text;
BEGIN
    SELECT state INTO v_prev FROM lane.jobs WHERE key = p_key;
    UPDATE lane.jobs
       SET state = 'failed', finished_at = p_now, failed_reason = p_reason,
           lock_token = NULL, lease_expires_at = NULL
     WHERE key = p_key
    RETURNING * INTO v_job;
    PERFORM lane._emit(v_job.queue, 'failed', v_job.id,
                       jsonb_build_object('prev', v_prev, 'failedReason', p_reason), p_now);
    IF v_job.attempts_made >= v_job.max_attempts THEN
        PERFORM lane._emit(v_job.queue, 'retries-exhausted', v_job.id,
                           jsonb_build_object('attemptsMade', v_job.attempts_made), p_now);
    END IF;
    PERFORM lane._apply_retention(v_job.queue, 'failed', v_job.options -> 'remove_on_fail',
                                  v_job.key, 1, p_now);
    PERFORM lane._drained_check(v_job.queue, p_now);
    RETURN v_job;
END $$;

-- ------------------------------------------------------------------ adding

-- Inserts jobs (already validated) in input order and returns one row per spec, in input
-- order (ADD-1..11): a custom id that exists, or that an earlier spec of the same call
-- takes, returns that job untouched, with no write, no event and no sequence advance
-- (ADD-3). Specs without a custom id (the common case) go in with one INSERT whose
-- RETURNING rows also feed the events INSERT: no per-row plpgsql, no array of rows, no
-- join back to lane.jobs. Measured on 1,000 specs: 16 ms in the database against 33 ms
-- for the earlier loop-and-array version; a plain unnest INSERT of the same rows into
-- lane.jobs takes 10 ms and into the raw baseline's two-index table 5 ms. A queue whose
-- record_events is off gets no event rows (~4 ms of the 16).
CREATE OR REPLACE FUNCTION lane._insert_jobs(p_queue text, p_names text[], p_datas jsonb[],
                                             p_options jsonb[], p_now timestamptz)
RETURNS SETOF lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_names), 0);
    v_custom_ids boolean;
    v_ids text[];
    v_seqs bigint[];
    v_fresh boolean[];
    v_taken text[];
    v_custom text;
    v_i integer;
    v_record boolean;
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
    v_record := coalesce((SELECT record_events FROM lane.queues WHERE name = p_queue), true);
    v_custom_ids := EXISTS (SELECT 1 FROM unnest(p_options) o WHERE o ->> 'job_id' IS NOT NULL);
    IF NOT v_custom_ids THEN
        -- Every spec is new: ids and enqueue sequences (for jobs due now) in input order.
        v_ids := ARRAY(SELECT nextval('lane.job_id_seq')::text FROM generate_series(1, v_n));
        v_seqs := ARRAY(SELECT CASE WHEN coalesce((u.opt ->> 'delay_ms')::bigint, 0) = 0
                                    THEN nextval('lane.enqueue_seq') END
                          FROM unnest(p_options) WITH ORDINALITY AS u(opt, ord)
                         ORDER BY u.ord);
        v_fresh := array_fill(true, ARRAY[v_n]);
    ELSE
        -- A custom id already stored, or repeated earlier in the call, is not new.
        v_ids := array_fill(NULL::text, ARRAY[v_n]);
        v_seqs := array_fill(NULL::bigint, ARRAY[v_n]);
        v_fresh := array_fill(false, ARRAY[v_n]);
        v_taken := ARRAY(SELECT j.id FROM lane.jobs j
                          WHERE j.queue = p_queue
                            AND j.id = ANY (ARRAY(SELECT o ->> 'job_id' FROM unnest(p_options) o
                                                   WHERE o ->> 'job_id' IS NOT NULL)));
        FOR v_i IN 1 .. v_n LOOP
            v_custom := p_options[v_i] ->> 'job_id';
            IF v_custom IS NULL THEN
                v_ids[v_i] := nextval('lane.job_id_seq')::text;
                v_fresh[v_i] := true;
            ELSE
                v_ids[v_i] := v_custom;
                IF NOT v_custom = ANY (v_taken) THEN
                    v_fresh[v_i] := true;
                    v_taken := v_taken || v_custom;
                END IF;
            END IF;
            IF v_fresh[v_i] AND coalesce((p_options[v_i] ->> 'delay_ms')::bigint, 0) = 0 THEN
                v_seqs[v_i] := nextval('lane.enqueue_seq');
            END IF;
        END LOOP;
    END IF;

    -- The new rows feed the events INSERT through RETURNING: no join back to lane.jobs,
    -- whose plan would depend on statistics that lag a fast-growing table. Without custom
    -- ids they are also the result, in key (= input) order.
    RETURN QUERY
    WITH inserted AS (
        INSERT INTO lane.jobs (queue, id, name, data, state, priority, lifo, order_key,
                               enqueued_seq, created_at, available_at, max_attempts,
                               backoff, timeout_ms, options)
        SELECT p_queue, u.id, u.name, coalesce(u.data, 'null'::jsonb),
               CASE WHEN u.seq IS NULL THEN 'delayed' ELSE 'waiting' END,
               coalesce((u.opt ->> 'priority')::integer, 0),
               coalesce((u.opt ->> 'lifo')::boolean, false),
               lane._order_key(coalesce((u.opt ->> 'priority')::integer, 0),
                               coalesce((u.opt ->> 'lifo')::boolean, false),
                               coalesce(u.seq, 0)),
               u.seq, p_now,
               p_now + coalesce((u.opt ->> 'delay_ms')::bigint, 0) * interval '1 millisecond',
               coalesce((u.opt ->> 'attempts')::integer, 1),
               nullif(u.opt -> 'backoff', 'null'::jsonb),
               (u.opt ->> 'timeout_ms')::bigint,
               u.opt
          FROM unnest(v_ids, p_names, p_datas, p_options, v_seqs, v_fresh)
               WITH ORDINALITY AS u(id, name, data, opt, seq, fresh, ord)
         WHERE u.fresh
         ORDER BY u.ord
        -- A concurrent add of the same custom id committed first: it wins, untouched.
        ON CONFLICT (queue, id) DO NOTHING
        RETURNING *
    ), events AS (
        INSERT INTO lane.events (queue, event, job_id, data, created_at)
        SELECT p_queue, e.event, n.id, e.data, p_now
          FROM inserted n
         CROSS JOIN LATERAL (VALUES
               (1, 'added', jsonb_build_object('name', n.name)),
               (2, n.state, CASE WHEN n.state = 'delayed'
                                 THEN jsonb_build_object('delay', lane._epoch_ms(n.available_at))
                                 ELSE '{}'::jsonb END)) AS e(k, event, data)
         WHERE v_record
         ORDER BY n.key, e.k
    )
    SELECT * FROM inserted WHERE NOT v_custom_ids ORDER BY key;
    -- ADD-4/5: jobs due now wake the claimers (a spec whose custom id existed wakes them
    -- needlessly, which is harmless).
    IF EXISTS (SELECT 1 FROM unnest(v_seqs) s WHERE s IS NOT NULL) THEN
        PERFORM lane._wake(p_queue);
    END IF;
    IF v_custom_ids THEN
        -- Every spec's job, new or already stored, by its unique (queue, id).
        RETURN QUERY
            SELECT j.* FROM unnest(v_ids) WITH ORDINALITY AS u(id, ord)
              JOIN LATERAL (SELECT * FROM lane.jobs j
                             WHERE j.queue = p_queue AND j.id = u.id) j ON true
             ORDER BY u.ord;
    END IF;
END $$;

-- ADD-1: one job. Without a custom id it is inserted here directly: going through
-- lane._insert_jobs (arrays, a row set read back into a variable) measured 357 us per
-- autocommit call against ~280 us, so the column mapping below repeats _insert_jobs'
-- on purpose; keep the two in step. A known queue skips the queue-name regex (its row
-- exists only because its name passed it); default options skip the option walk. The
-- same read of the queue row gives record_events: off, no event rows (~37 us of ~272).
-- Everything here runs before the commit that makes the job visible, so it is also most
-- of what W4's enqueue-to-start latency has over the raw INSERT (benchmarks/README.md:
-- a worker's claim starts ~0.05 ms after the producer sees this call return).
CREATE OR REPLACE FUNCTION lane.add_job(p_queue text, p_name text,
                                        p_data jsonb DEFAULT 'null',
                                        p_options jsonb DEFAULT '{}',
                                        p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_options jsonb := coalesce(p_options, '{}'::jsonb);
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_known boolean;
    v_record boolean;
    v_delay bigint;
    v_seq bigint;
    v_job lane.jobs;
BEGIN
    SELECT record_events INTO v_record FROM lane.queues WHERE name = p_queue;
    v_known := FOUND;
    IF NOT v_known THEN
        PERFORM lane._check_queue(p_queue);
    END IF;
    IF p_name IS NULL OR p_name = '' OR length(p_name) > 255 THEN
        PERFORM lane._check_name(p_name);
    END IF;
    IF v_options <> '{}'::jsonb THEN
        PERFORM lane._check_options(v_options);
    END IF;
    IF NOT v_known THEN
        INSERT INTO lane.queues (name) VALUES (p_queue) ON CONFLICT DO NOTHING;
    END IF;
    IF v_options ->> 'job_id' IS NOT NULL THEN
        -- A custom id may name a stored job (ADD-3): the general path handles it.
        SELECT * INTO v_job
          FROM lane._insert_jobs(p_queue, ARRAY[p_name], ARRAY[p_data], ARRAY[v_options], v_now);
        RETURN v_job;
    END IF;
    v_delay := coalesce((v_options ->> 'delay_ms')::bigint, 0);
    IF v_delay = 0 THEN
        v_seq := nextval('lane.enqueue_seq');
    END IF;
    INSERT INTO lane.jobs (queue, id, name, data, state, priority, lifo, order_key,
                           enqueued_seq, created_at, available_at, max_attempts,
                           backoff, timeout_ms, options)
    VALUES (p_queue, nextval('lane.job_id_seq')::text, p_name, coalesce(p_data, 'null'::jsonb),
            CASE WHEN v_seq IS NULL THEN 'delayed' ELSE 'waiting' END,
            coalesce((v_options ->> 'priority')::integer, 0),
            coalesce((v_options ->> 'lifo')::boolean, false),
            lane._order_key(coalesce((v_options ->> 'priority')::integer, 0),
                            coalesce((v_options ->> 'lifo')::boolean, false),
                            coalesce(v_seq, 0)),
            v_seq, v_now, v_now + v_delay * interval '1 millisecond',
            coalesce((v_options ->> 'attempts')::integer, 1),
            nullif(v_options -> 'backoff', 'null'::jsonb),
            (v_options ->> 'timeout_ms')::bigint,
            v_options)
    RETURNING * INTO v_job;
    IF v_record IS NOT FALSE THEN  -- a queue created just now records (the column default)
        INSERT INTO lane.events (queue, event, job_id, data, created_at)
        VALUES (p_queue, 'added', v_job.id, jsonb_build_object('name', p_name), v_now),
               (p_queue, v_job.state, v_job.id,
                CASE WHEN v_seq IS NULL
                     THEN jsonb_build_object('delay', lane._epoch_ms(v_job.available_at))
                     ELSE '{}'::jsonb END, v_now);
    END IF;
    IF v_seq IS NOT NULL THEN
        PERFORM lane._wake(p_queue);
    END IF;
    RETURN v_job;
END $$;

-- ADD-11: all specs are validated before the first insert; results in input order.
-- Only specs with a suspect name or non-default options are walked one by one, in
-- input order, so the first bad spec is the one reported.
CREATE OR REPLACE FUNCTION lane.add_jobs(p_queue text, p_names text[], p_datas jsonb[],
                                         p_options jsonb[], p_now timestamptz DEFAULT NULL)
RETURNS SETOF lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_names), 0);
    v_options jsonb[];
    v_i integer;
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF coalesce(cardinality(p_datas), 0) <> v_n OR coalesce(cardinality(p_options), 0) <> v_n THEN
        PERFORM lane._fail('LN000', 'add_jobs needs names, datas and options of equal length');
    END IF;
    v_options := ARRAY(SELECT coalesce(o, '{}'::jsonb) FROM unnest(p_options) o);
    FOR v_i IN
        SELECT u.ord FROM unnest(p_names, v_options) WITH ORDINALITY AS u(name, opt, ord)
         WHERE u.name IS NULL OR u.name = '' OR length(u.name) > 255 OR u.opt <> '{}'::jsonb
         ORDER BY u.ord
    LOOP
        PERFORM lane._check_name(p_names[v_i]);
        PERFORM lane._check_options(v_options[v_i]);
    END LOOP;
    PERFORM lane._ensure_queue(p_queue);
    RETURN QUERY SELECT * FROM lane._insert_jobs(p_queue, p_names, p_datas, v_options,
                                                 coalesce(p_now, clock_timestamp()));
END $$;

-- ------------------------------------------------------------------ claiming

-- Claims across queues in the given (priority) order, up to p_limits[i] from queue i and
-- p_total overall (CLAIM-1, CLAIM-2, CLAIM-15). Each queue first gets its due delayed jobs
-- promoted, even when paused (PAUSE-12); a paused queue then yields nothing.
-- The `key = ANY(ARRAY(... SKIP LOCKED))` shape keeps an index lookup under a generic plan
-- and measured 4-13 % faster than a CTE join (DESIGN.md).
CREATE OR REPLACE FUNCTION lane.claim_jobs(p_worker_id text, p_queues text[], p_limits integer[],
                                           p_lease_ms bigint, p_total integer DEFAULT NULL,
                                           p_now timestamptz DEFAULT NULL)
RETURNS SETOF lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_left integer := coalesce(p_total, 2147483647);
    v_queue text;
    v_limit integer;
    v_paused boolean;
    v_record boolean;
    v_keys bigint[];
    v_i integer;
BEGIN
    IF p_lease_ms IS NULL OR p_lease_ms <= 0 THEN
        PERFORM lane._fail('LN003', format('lease must be positive, got %s ms', p_lease_ms));
    END IF;
    IF coalesce(cardinality(p_queues), 0) <> coalesce(cardinality(p_limits), 0) THEN
        PERFORM lane._fail('LN000', 'claim_jobs needs one limit per queue');
    END IF;
    FOR v_i IN 1 .. coalesce(cardinality(p_queues), 0) LOOP
        EXIT WHEN v_left <= 0;
        v_queue := p_queues[v_i];
        v_limit := least(p_limits[v_i], v_left);
        CONTINUE WHEN v_limit IS NULL OR v_limit <= 0;
        SELECT paused, record_events INTO v_paused, v_record
          FROM lane.queues WHERE name = v_queue;
        CONTINUE WHEN NOT FOUND;
        -- CLAIM-3: promoted jobs of a paused queue wake nobody.
        PERFORM lane._promote_due(ARRAY[v_queue], v_now, false);
        CONTINUE WHEN v_paused;
        v_keys := ARRAY(SELECT key FROM lane.jobs
                         WHERE queue = v_queue AND state = 'waiting'
                         ORDER BY order_key, key
                         LIMIT v_limit FOR UPDATE SKIP LOCKED);
        CONTINUE WHEN cardinality(v_keys) = 0;
        -- `j.key = ANY(...)` keeps a primary-key lookup whatever the (possibly stale)
        -- statistics say; the events come from the updated rows, not a join back.
        RETURN QUERY
        WITH claimed AS (
            UPDATE lane.jobs j
               SET state = 'active', lock_token = gen_random_uuid(), worker_id = p_worker_id,
                   processed_at = v_now, attempts_started = j.attempts_started + 1,
                   lease_expires_at = v_now + p_lease_ms * interval '1 millisecond'
              FROM unnest(v_keys) WITH ORDINALITY AS u(key, ord)
             WHERE j.key = ANY (v_keys) AND j.key = u.key
            RETURNING j AS job, u.ord
        ), logged AS (
            INSERT INTO lane.events (queue, event, job_id, data, created_at)
            SELECT v_queue, 'active', (c.job).id, '{"prev": "waiting"}', v_now
              FROM claimed c WHERE v_record ORDER BY c.ord
        )
        SELECT (c.job).* FROM claimed c ORDER BY c.ord;
        -- No re-notify here (CLAIM-8): every LISTENing worker already received the
        -- wake-up that made these jobs ready, and a NOTIFY in each claim would serialise
        -- all claim commits on the notification queue lock.
        v_left := v_left - cardinality(v_keys);
    END LOOP;
END $$;

-- CLAIM-5/6: extends every lease still held under its token; returns the input positions
-- (1-based) of the ones that failed.
CREATE OR REPLACE FUNCTION lane.renew_leases(p_queues text[], p_ids text[], p_tokens uuid[],
                                             p_lease_ms bigint, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (ord integer, queue text, id text) LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_keys bigint[];
BEGIN
    IF p_lease_ms IS NULL OR p_lease_ms <= 0 THEN
        PERFORM lane._fail('LN003', format('lease must be positive, got %s ms', p_lease_ms));
    END IF;
    v_keys := lane._lock_held(p_queues, p_ids, p_tokens);
    UPDATE lane.jobs j
       SET lease_expires_at = v_now + p_lease_ms * interval '1 millisecond'
     WHERE j.key = ANY (v_keys) AND j.state = 'active';
    RETURN QUERY
    SELECT i.ord::integer, i.queue, i.id
      FROM unnest(p_queues, p_ids, p_tokens) WITH ORDINALITY AS i(queue, id, token, ord)
     WHERE NOT EXISTS (SELECT 1 FROM lane.jobs j
                        WHERE j.key = ANY (v_keys) AND j.queue = i.queue AND j.id = i.id
                          AND j.lock_token = i.token)
     ORDER BY i.ord;
END $$;

-- ------------------------------------------------------------------ finishing

-- FIN-1/2 for a batch: the main speed lever (one statement completes the whole batch).
-- Returns the input position and row, as of completion (before retention may delete
-- it), of every item that completed. An item repeated in the batch completes once, at its
-- first position, like completing the items one after another.
CREATE OR REPLACE FUNCTION lane._complete(p_queues text[], p_ids text[], p_tokens uuid[],
                                          p_results jsonb[], p_now timestamptz)
RETURNS TABLE (ord bigint, job lane.jobs) LANGUAGE plpgsql AS $$
DECLARE
    v_keys bigint[] := lane._lock_held(p_queues, p_ids, p_tokens);
    v_done lane.jobs[];
    v_ords bigint[];
    v_row record;
BEGIN
    WITH input AS (
        SELECT DISTINCT ON (i.queue, i.id, i.token) *
          FROM unnest(p_queues, p_ids, p_tokens, p_results)
               WITH ORDINALITY AS i(queue, id, token, result, ord)
         ORDER BY i.queue, i.id, i.token, i.ord
    ), done AS (
        UPDATE lane.jobs j
           SET state = 'completed', finished_at = p_now,
               return_value = coalesce(i.result, 'null'::jsonb),
               lock_token = NULL, lease_expires_at = NULL
          FROM input i
         WHERE j.key = ANY (v_keys)
           AND j.queue = i.queue AND j.id = i.id AND j.state = 'active' AND j.lock_token = i.token
        RETURNING j AS job, i.ord
    )
    SELECT array_agg(d.job ORDER BY d.ord), array_agg(d.ord ORDER BY d.ord)
      INTO v_done, v_ords FROM done d;
    IF v_done IS NULL THEN
        RETURN;
    END IF;
    -- Only for the queues that record events.
    INSERT INTO lane.events (queue, event, job_id, data, created_at)
    SELECT d.queue, 'completed', d.id,
           jsonb_build_object('prev', 'active', 'returnvalue', d.return_value), p_now
      FROM unnest(v_done) WITH ORDINALITY AS d
      LEFT JOIN lane.queues q ON q.name = d.queue
     WHERE coalesce(q.record_events, true)
     ORDER BY d.ordinality;
    -- Retention: each distinct policy once per queue; age limits scale with the batch.
    FOR v_row IN
        SELECT d.queue, d.options -> 'remove_on_complete' AS policy, count(*)::integer AS n,
               max(d.key) AS key
          FROM unnest(v_done) d
         WHERE d.options ? 'remove_on_complete'
         GROUP BY 1, 2
    LOOP
        IF v_row.policy = 'true'::jsonb THEN
            DELETE FROM lane.job_logs WHERE job_key IN (
                SELECT d.key FROM unnest(v_done) d
                 WHERE d.queue = v_row.queue AND d.options -> 'remove_on_complete' = 'true'::jsonb);
            DELETE FROM lane.jobs WHERE key IN (
                SELECT d.key FROM unnest(v_done) d
                 WHERE d.queue = v_row.queue AND d.options -> 'remove_on_complete' = 'true'::jsonb);
        ELSE
            PERFORM lane._apply_retention(v_row.queue, 'completed', v_row.policy, v_row.key,
                                          v_row.n, p_now);
        END IF;
    END LOOP;
    FOR v_row IN SELECT DISTINCT d.queue FROM unnest(v_done) d LOOP
        PERFORM lane._drained_check(v_row.queue, p_now);
    END LOOP;
    -- Subscripts, not a two-array unnest: unnest would expand the composite into columns.
    RETURN QUERY SELECT v_ords[i], v_done[i] FROM generate_subscripts(v_ords, 1) AS i;
END $$;

CREATE OR REPLACE FUNCTION lane.complete_jobs(p_queues text[], p_ids text[], p_tokens uuid[],
                                              p_results jsonb[], p_now timestamptz DEFAULT NULL)
RETURNS TABLE (ord integer, queue text, id text, status text, state text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH done AS (
        SELECT d.ord FROM lane._complete(p_queues, p_ids, p_tokens, p_results,
                                         coalesce(p_now, clock_timestamp())) d
    )
    SELECT i.ord::integer, i.queue, i.id,
           CASE WHEN d.ord IS NOT NULL THEN 'ok'
                WHEN EXISTS (SELECT 1 FROM lane.jobs j WHERE j.queue = i.queue AND j.id = i.id)
                     THEN 'lock_mismatch'
                ELSE 'not_found' END,
           CASE WHEN d.ord IS NOT NULL THEN 'completed' END
      FROM unnest(p_queues, p_ids) WITH ORDINALITY AS i(queue, id, ord)
      LEFT JOIN done d ON d.ord = i.ord
     ORDER BY i.ord;
END $$;

CREATE OR REPLACE FUNCTION lane.complete_job(p_queue text, p_id text, p_token uuid,
                                             p_result jsonb DEFAULT 'null',
                                             p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs;
BEGIN
    PERFORM lane._owned_job(p_queue, p_id, p_token);
    SELECT (d.job).* INTO v_job
      FROM lane._complete(ARRAY[p_queue], ARRAY[p_id], ARRAY[p_token], ARRAY[p_result],
                          coalesce(p_now, clock_timestamp())) d;
    RETURN v_job;
END $$;

-- FIN-3..5: one failure; NULL when the job is missing or not held under p_token.
CREATE OR REPLACE FUNCTION lane._fail_one(p_queue text, p_id text, p_token uuid, p_reason text,
                                          p_stacktrace text, p_discard boolean,
                                          p_now timestamptz)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs;
    v_delay bigint;
BEGIN
    UPDATE lane.jobs
       SET attempts_made = attempts_made + 1, failed_reason = p_reason,
           stacktrace = CASE WHEN p_stacktrace IS NULL THEN stacktrace
                             ELSE stacktrace || p_stacktrace END,
           lock_token = NULL, lease_expires_at = NULL
     WHERE queue = p_queue AND id = p_id AND state = 'active' AND lock_token = p_token
    RETURNING * INTO v_job;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF coalesce(p_discard, false) OR v_job.attempts_made >= v_job.max_attempts THEN
        RETURN lane._fail_terminal(v_job.key, p_reason, p_now);
    END IF;
    v_delay := lane._backoff_ms(v_job.backoff, v_job.attempts_made);
    IF v_delay > 0 THEN
        UPDATE lane.jobs SET state = 'delayed',
                             available_at = p_now + v_delay * interval '1 millisecond'
         WHERE key = v_job.key
        RETURNING * INTO v_job;
        PERFORM lane._emit(p_queue, 'delayed', p_id,
                           jsonb_build_object('delay', lane._epoch_ms(v_job.available_at),
                                              'prev', 'active', 'failedReason', p_reason), p_now);
    ELSE
        PERFORM lane._make_waiting(ARRAY[v_job.key], 'active', p_now);
        PERFORM lane._wake(p_queue);
        SELECT * INTO v_job FROM lane.jobs WHERE key = v_job.key;
    END IF;
    RETURN v_job;
END $$;

CREATE OR REPLACE FUNCTION lane.fail_jobs(p_queues text[], p_ids text[], p_tokens uuid[],
                                          p_reasons text[], p_stacktraces text[],
                                          p_discards boolean[], p_now timestamptz DEFAULT NULL)
RETURNS TABLE (ord integer, queue text, id text, status text, state text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_job lane.jobs;
    v_i integer;
BEGIN
    PERFORM lane._lock_held(p_queues, p_ids, p_tokens);
    FOR v_i IN 1 .. coalesce(cardinality(p_ids), 0) LOOP
        v_job := lane._fail_one(p_queues[v_i], p_ids[v_i], p_tokens[v_i], p_reasons[v_i],
                                p_stacktraces[v_i], p_discards[v_i], v_now);
        ord := v_i;
        queue := p_queues[v_i];
        id := p_ids[v_i];
        state := v_job.state;
        IF v_job.key IS NOT NULL THEN
            status := 'ok';
        ELSIF EXISTS (SELECT 1 FROM lane.jobs j WHERE j.queue = p_queues[v_i] AND j.id = p_ids[v_i]) THEN
            status := 'lock_mismatch';
        ELSE
            status := 'not_found';
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION lane.fail_job(p_queue text, p_id text, p_token uuid, p_reason text,
                                         p_stacktrace text DEFAULT NULL,
                                         p_discard_retry boolean DEFAULT false,
                                         p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._owned_job(p_queue, p_id, p_token);
    RETURN lane._fail_one(p_queue, p_id, p_token, p_reason, p_stacktrace, p_discard_retry,
                          coalesce(p_now, clock_timestamp()));
END $$;

-- MGMT-7, ORD-3: back to the very front of its priority bucket.
CREATE OR REPLACE FUNCTION lane.release_job(p_queue text, p_id text, p_token uuid,
                                            p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs := lane._owned_job(p_queue, p_id, p_token);
BEGIN
    UPDATE lane.jobs
       SET state = 'waiting', enqueued_seq = nextval('lane.enqueue_seq'),
           order_key = priority::bigint * 2199023255552,
           lock_token = NULL, lease_expires_at = NULL, processed_at = NULL
     WHERE key = v_job.key
    RETURNING * INTO v_job;
    PERFORM lane._emit(p_queue, 'waiting', p_id, '{"prev": "active"}', coalesce(p_now, clock_timestamp()));
    PERFORM lane._wake(p_queue);
    RETURN v_job;
END $$;

-- MGMT-6
CREATE OR REPLACE FUNCTION lane.delay_job(p_queue text, p_id text, p_token uuid,
                                          p_delay_ms bigint, p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_job lane.jobs := lane._owned_job(p_queue, p_id, p_token);
BEGIN
    IF p_delay_ms IS NULL OR p_delay_ms < 0 THEN
        PERFORM lane._fail('LN003', format('delay must not be negative, got %s ms', p_delay_ms));
    END IF;
    UPDATE lane.jobs
       SET state = 'delayed', available_at = v_now + p_delay_ms * interval '1 millisecond',
           lock_token = NULL, lease_expires_at = NULL
     WHERE key = v_job.key
    RETURNING * INTO v_job;
    PERFORM lane._emit(p_queue, 'delayed', p_id,
                       jsonb_build_object('delay', lane._epoch_ms(v_job.available_at),
                                          'prev', 'active'), v_now);
    RETURN v_job;
END $$;

-- ------------------------------------------------------------------ maintenance

-- STALL-1..3, STALL-6: one pass over expired leases. The lease column is authoritative,
-- so no candidate set and no pass that rewrites every active row.
CREATE OR REPLACE FUNCTION lane.recover_stalled(p_queues text[] DEFAULT NULL,
                                                p_max_stalled_count integer DEFAULT 1,
                                                p_now timestamptz DEFAULT NULL)
RETURNS TABLE (queue text, id text, state text) LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_job lane.jobs;
BEGIN
    FOR v_job IN
        SELECT * FROM lane.jobs j
         WHERE j.state = 'active' AND j.lease_expires_at < v_now
           AND (p_queues IS NULL OR j.queue = ANY (p_queues))
         ORDER BY j.key
         FOR UPDATE SKIP LOCKED
    LOOP
        UPDATE lane.jobs SET stalled_count = stalled_count + 1 WHERE key = v_job.key
        RETURNING * INTO v_job;
        PERFORM lane._emit(v_job.queue, 'stalled', v_job.id, '{"reason": "lease expired"}', v_now);
        queue := v_job.queue;
        id := v_job.id;
        IF v_job.stalled_count > coalesce(p_max_stalled_count, 1) THEN
            PERFORM lane._fail_terminal(v_job.key, 'job stalled more than allowable limit', v_now);
            state := 'failed';
        ELSE
            UPDATE lane.jobs SET lock_token = NULL, lease_expires_at = NULL WHERE key = v_job.key;
            PERFORM lane._make_waiting(ARRAY[v_job.key], 'active', v_now);
            PERFORM lane._wake(v_job.queue);
            state := 'waiting';
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;

-- MGMT-4
CREATE OR REPLACE FUNCTION lane.promote_due_jobs(p_queues text[] DEFAULT NULL,
                                                 p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    RETURN lane._promote_due(p_queues, coalesce(p_now, clock_timestamp()), true);
END $$;

-- ------------------------------------------------------------------ management

-- MGMT-3
CREATE OR REPLACE FUNCTION lane.promote_job(p_queue text, p_id text, p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint := lane._job_key(p_queue, p_id);
    v_job lane.jobs;
BEGIN
    SELECT * INTO v_job FROM lane.jobs WHERE key = v_key;
    IF v_job.state <> 'delayed' THEN
        PERFORM lane._fail('LN006', format('job %s is %s, not delayed: cannot promote it',
                                           p_id, v_job.state));
    END IF;
    PERFORM lane._make_waiting(ARRAY[v_key], 'delayed', coalesce(p_now, clock_timestamp()));
    PERFORM lane._wake(p_queue);
    SELECT * INTO v_job FROM lane.jobs WHERE key = v_key;
    RETURN v_job;
END $$;

-- MGMT-5
CREATE OR REPLACE FUNCTION lane.reschedule_job(p_queue text, p_id text, p_delay_ms bigint,
                                               p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_key bigint := lane._job_key(p_queue, p_id);
    v_job lane.jobs;
BEGIN
    IF p_delay_ms IS NULL OR p_delay_ms < 0 THEN
        PERFORM lane._fail('LN003', format('delay must not be negative, got %s ms', p_delay_ms));
    END IF;
    SELECT * INTO v_job FROM lane.jobs WHERE key = v_key;
    IF v_job.state <> 'delayed' THEN
        PERFORM lane._fail('LN006', format('job %s is %s, not delayed: cannot reschedule it',
                                           p_id, v_job.state));
    END IF;
    UPDATE lane.jobs SET available_at = v_now + p_delay_ms * interval '1 millisecond'
     WHERE key = v_key
    RETURNING * INTO v_job;
    PERFORM lane._emit(p_queue, 'delayed', p_id,
                       jsonb_build_object('delay', lane._epoch_ms(v_job.available_at)), v_now);
    RETURN v_job;
END $$;

-- MGMT-8
CREATE OR REPLACE FUNCTION lane.retry_job(p_queue text, p_id text, p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint := lane._job_key(p_queue, p_id);
    v_job lane.jobs;
BEGIN
    SELECT * INTO v_job FROM lane.jobs WHERE key = v_key;
    IF v_job.state NOT IN ('completed', 'failed') THEN
        PERFORM lane._fail('LN006', format(
            'job %s is %s: only completed or failed jobs can be retried', p_id, v_job.state));
    END IF;
    UPDATE lane.jobs
       SET failed_reason = NULL, return_value = NULL, processed_at = NULL, finished_at = NULL,
           attempts_made = 0, attempts_started = 0, stalled_count = 0, stacktrace = '{}'
     WHERE key = v_key;
    PERFORM lane._make_waiting(ARRAY[v_key], v_job.state, coalesce(p_now, clock_timestamp()));
    PERFORM lane._wake(p_queue);
    SELECT * INTO v_job FROM lane.jobs WHERE key = v_key;
    RETURN v_job;
END $$;

-- MGMT-16: a live lease protects a job; an expired one does not.
CREATE OR REPLACE FUNCTION lane.remove_job(p_queue text, p_id text, p_now timestamptz DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_job lane.jobs;
BEGIN
    SELECT * INTO v_job FROM lane.jobs WHERE queue = p_queue AND id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_job.state = 'active' AND v_job.lease_expires_at >= v_now THEN
        PERFORM lane._fail('LN007', format(
            'job %s is active under a lease until %s: it cannot be removed',
            p_id, v_job.lease_expires_at));
    END IF;
    DELETE FROM lane.job_logs WHERE job_key = v_job.key;
    DELETE FROM lane.jobs WHERE key = v_job.key;
    PERFORM lane._emit(p_queue, 'removed', p_id, jsonb_build_object('prev', v_job.state), v_now);
    RETURN true;
END $$;

-- MGMT-10
CREATE OR REPLACE FUNCTION lane.update_job_data(p_queue text, p_id text, p_data jsonb)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs;
BEGIN
    UPDATE lane.jobs SET data = coalesce(p_data, 'null'::jsonb)
     WHERE key = lane._job_key(p_queue, p_id)
    RETURNING * INTO v_job;
    RETURN v_job;
END $$;

-- MGMT-11
CREATE OR REPLACE FUNCTION lane.update_job_progress(p_queue text, p_id text, p_progress jsonb,
                                                    p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs;
BEGIN
    UPDATE lane.jobs SET progress = coalesce(p_progress, 'null'::jsonb)
     WHERE key = lane._job_key(p_queue, p_id)
    RETURNING * INTO v_job;
    PERFORM lane._emit(p_queue, 'progress', p_id,
                       jsonb_build_object('data', v_job.progress), coalesce(p_now, clock_timestamp()));
    RETURN v_job;
END $$;

-- MGMT-9: a waiting job is requeued in its new position; other states store the value.
CREATE OR REPLACE FUNCTION lane.update_job_priority(p_queue text, p_id text, p_priority integer,
                                                    p_lifo boolean DEFAULT NULL,
                                                    p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint;
    v_job lane.jobs;
BEGIN
    IF p_priority IS NULL OR p_priority NOT BETWEEN 0 AND 2097152 THEN
        PERFORM lane._fail('LN002', format(
            'priority must be an integer between 0 and 2097152, got %s', p_priority));
    END IF;
    v_key := lane._job_key(p_queue, p_id);
    UPDATE lane.jobs
       SET priority = p_priority, lifo = coalesce(p_lifo, lifo),
           options = CASE WHEN p_lifo IS NULL THEN options
                          ELSE options || jsonb_build_object('lifo', p_lifo) END
     WHERE key = v_key
    RETURNING * INTO v_job;
    IF v_job.state = 'waiting' THEN
        PERFORM lane._make_waiting(ARRAY[v_key], NULL, coalesce(p_now, clock_timestamp()));
        SELECT * INTO v_job FROM lane.jobs WHERE key = v_key;
    END IF;
    RETURN v_job;
END $$;

-- MGMT-13: returns the number of entries kept. Logs write no event (EVS-5).
CREATE OR REPLACE FUNCTION lane.add_job_log(p_queue text, p_id text, p_message text,
                                            p_keep integer DEFAULT NULL,
                                            p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint := lane._job_key(p_queue, p_id);
    v_count integer;
BEGIN
    IF p_keep IS NOT NULL AND p_keep < 0 THEN
        PERFORM lane._fail('LN003', format('keep must not be negative, got %s', p_keep));
    END IF;
    INSERT INTO lane.job_logs (job_key, ts, message)
    VALUES (v_key, coalesce(p_now, clock_timestamp()), coalesce(p_message, ''));
    IF p_keep IS NOT NULL THEN
        PERFORM lane._trim_logs(v_key, p_keep);
    END IF;
    SELECT count(*) INTO v_count FROM lane.job_logs WHERE job_key = v_key;
    RETURN v_count;
END $$;

CREATE OR REPLACE FUNCTION lane._trim_logs(p_key bigint, p_keep integer)
RETURNS void LANGUAGE sql AS $$
    DELETE FROM lane.job_logs
     WHERE job_key = p_key
       AND seq NOT IN (SELECT seq FROM lane.job_logs WHERE job_key = p_key
                        ORDER BY seq DESC LIMIT p_keep)
$$;

-- MGMT-14: Redis LRANGE windows over the log (oldest first, or newest first when not
-- ascending); inclusive indices, negative ones counted from the end.
CREATE OR REPLACE FUNCTION lane.get_job_logs(p_queue text, p_id text, p_start integer DEFAULT 0,
                                             p_end integer DEFAULT -1, p_asc boolean DEFAULT true)
RETURNS TABLE (count integer, ts timestamptz[], messages text[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_key bigint;
    v_first integer;
    v_last integer;
BEGIN
    SELECT key INTO v_key FROM lane.jobs WHERE queue = p_queue AND id = p_id;
    SELECT count(*)::integer INTO count FROM lane.job_logs WHERE job_key = v_key;
    v_first := CASE WHEN p_start < 0 THEN greatest(count + p_start, 0) ELSE p_start END;
    v_last := CASE WHEN p_end < 0 THEN count + p_end ELSE least(p_end, count - 1) END;
    IF v_key IS NULL OR v_first > v_last THEN
        ts := '{}';
        messages := '{}';
    ELSE
        SELECT coalesce(array_agg(l.ts ORDER BY l.n), '{}'), coalesce(array_agg(l.message ORDER BY l.n), '{}')
          INTO ts, messages
          FROM (SELECT g.ts, g.message,
                       row_number() OVER (ORDER BY CASE WHEN p_asc THEN g.seq ELSE -g.seq END) - 1 AS n
                  FROM lane.job_logs g WHERE g.job_key = v_key) l
         WHERE l.n BETWEEN v_first AND v_last;
    END IF;
    RETURN NEXT;
END $$;

-- MGMT-15
CREATE OR REPLACE FUNCTION lane.clear_job_logs(p_queue text, p_id text, p_keep integer DEFAULT 0)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint;
BEGIN
    IF p_keep IS NULL OR p_keep < 0 THEN
        PERFORM lane._fail('LN003', format('keep must not be negative, got %s', p_keep));
    END IF;
    v_key := lane._job_key(p_queue, p_id);
    PERFORM lane._trim_logs(v_key, p_keep);
END $$;

-- PAUSE-1: adds and promotion go on while paused; only claims stop.
CREATE OR REPLACE FUNCTION lane.pause_queue(p_queue text, p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues SET paused = true WHERE name = p_queue;
    PERFORM lane._emit(p_queue, 'paused', NULL, '{}', coalesce(p_now, clock_timestamp()));
END $$;

CREATE OR REPLACE FUNCTION lane.resume_queue(p_queue text, p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues SET paused = false WHERE name = p_queue;
    PERFORM lane._emit(p_queue, 'resumed', NULL, '{}', coalesce(p_now, clock_timestamp()));
    PERFORM lane._wake(p_queue);
END $$;

CREATE OR REPLACE FUNCTION lane.is_queue_paused(p_queue text)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT paused FROM lane.queues WHERE name = p_queue), false)
$$;

-- ------------------------------------------------------------------ reading

CREATE OR REPLACE FUNCTION lane.get_job(p_queue text, p_id text)
RETURNS SETOF lane.jobs LANGUAGE sql STABLE AS $$
    SELECT * FROM lane.jobs WHERE queue = p_queue AND id = p_id
$$;

CREATE OR REPLACE FUNCTION lane.get_job_state(p_queue text, p_id text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT state FROM lane.jobs WHERE queue = p_queue AND id = p_id
$$;

-- MGMT-23: all six states when p_states is NULL or empty; duplicates count once, in
-- first-seen order; zero rows included.
CREATE OR REPLACE FUNCTION lane.get_job_counts(p_queue text, p_states text[] DEFAULT NULL)
RETURNS TABLE (state text, count bigint) LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_states text[] := CASE WHEN coalesce(cardinality(p_states), 0) = 0
                            THEN ARRAY['waiting', 'delayed', 'active', 'waiting-children',
                                       'completed', 'failed']
                            ELSE p_states END;
BEGIN
    PERFORM lane._check_states(v_states);
    RETURN QUERY
    WITH wanted AS (
        SELECT s.state, min(s.ord) AS ord
          FROM unnest(v_states) WITH ORDINALITY AS s(state, ord) GROUP BY s.state
    )
    SELECT w.state, (SELECT count(*) FROM lane.jobs j WHERE j.queue = p_queue AND j.state = w.state)
      FROM wanted w ORDER BY w.ord;
END $$;

-- MGMT-2: ordered by state (ALL_STATES order) then insertion order.
CREATE OR REPLACE FUNCTION lane.list_jobs(p_queue text, p_states text[],
                                          p_descending boolean DEFAULT false,
                                          p_offset integer DEFAULT 0, p_limit integer DEFAULT 20)
RETURNS SETOF lane.jobs LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM lane._check_states(p_states);
    IF p_offset < 0 OR p_limit < 0 THEN
        PERFORM lane._fail('LN003', 'offset and limit must not be negative');
    END IF;
    RETURN QUERY
    SELECT * FROM lane.jobs j
     WHERE j.queue = p_queue AND j.state = ANY (p_states)
     ORDER BY CASE WHEN p_descending THEN -lane._state_rank(j.state) ELSE lane._state_rank(j.state) END,
              CASE WHEN p_descending THEN -j.key ELSE j.key END
    OFFSET p_offset LIMIT p_limit;
END $$;

CREATE OR REPLACE FUNCTION lane.count_jobs(p_queue text, p_states text[])
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM lane._check_states(p_states);
    RETURN (SELECT count(*) FROM lane.jobs WHERE queue = p_queue AND state = ANY (p_states));
END $$;

CREATE OR REPLACE FUNCTION lane._state_rank(p_state text)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_position(ARRAY['waiting', 'delayed', 'active', 'waiting-children',
                                'completed', 'failed'], p_state)
$$;

-- EVS-2: events with ids in [p_start, p_end] (NULL = open end), in id order.
CREATE OR REPLACE FUNCTION lane.read_events(p_queue text, p_start bigint DEFAULT NULL,
                                            p_end bigint DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS SETOF lane.events LANGUAGE sql STABLE AS $$
    SELECT * FROM lane.events
     WHERE queue = p_queue
       AND id >= coalesce(p_start, 0) AND id <= coalesce(p_end, 9223372036854775807)
     ORDER BY id
     LIMIT greatest(p_limit, 0)
$$;

-- ------------------------------------------------------------------ worker support

-- The queues that exist, by name: what a worker serving "every queue" claims from.
CREATE OR REPLACE FUNCTION lane.list_queues()
RETURNS SETOF text LANGUAGE sql STABLE AS $$
    SELECT name FROM lane.queues ORDER BY name
$$;

-- Milliseconds (on the database clock) until the earliest delayed job of these queues
-- (all when NULL) is due; 0 when one is already due, NULL when none is delayed. A worker
-- sleeps this long instead of polling for delayed work (CLAIM-7).
CREATE OR REPLACE FUNCTION lane.next_due_in_ms(p_queues text[] DEFAULT NULL)
RETURNS bigint LANGUAGE sql STABLE AS $$
    -- greatest() skips NULLs, so "no delayed job" is kept NULL explicitly.
    SELECT CASE WHEN min(available_at) IS NOT NULL THEN greatest(0, ceil(
               extract(epoch FROM min(available_at) - clock_timestamp()) * 1000))::bigint END
      FROM lane.jobs
     WHERE state = 'delayed' AND (p_queues IS NULL OR queue = ANY (p_queues))
$$;

-- EVS-3: trims each queue's events (all queues when NULL) to its max_events, newest kept.
CREATE OR REPLACE FUNCTION lane.trim_events(p_queues text[] DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_queue text;
    v_max integer;
    v_cut bigint;
    v_deleted bigint;
    v_total bigint := 0;
BEGIN
    FOR v_queue, v_max IN
        SELECT name, max_events FROM lane.queues
         WHERE p_queues IS NULL OR name = ANY (p_queues) ORDER BY name
    LOOP
        SELECT id INTO v_cut FROM lane.events WHERE queue = v_queue
         ORDER BY id DESC OFFSET v_max LIMIT 1;
        CONTINUE WHEN v_cut IS NULL;
        DELETE FROM lane.events WHERE queue = v_queue AND id <= v_cut;
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        v_total := v_total + v_deleted;
    END LOOP;
    RETURN v_total;
END $$;

-- ------------------------------------------------------------------ queue retention

-- The bounded default retention (docs/decisions.md): a queue keeps its newest
-- keep_completed completed and keep_failed failed jobs (defaults 10,000 and 100,000, the
-- lane.queues column defaults); NULL keeps all (RET-1's "indefinitely", per queue).
-- Per-job remove_on_complete / remove_on_fail (RET-2..5) still apply at finish time; this
-- bound is an extra cap that lane.prune_finished enforces afterwards, in the background.
CREATE OR REPLACE FUNCTION lane.set_queue_retention(p_queue text, p_keep_completed integer,
                                                    p_keep_failed integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF p_keep_completed < 0 OR p_keep_failed < 0 THEN
        PERFORM lane._fail('LN003', format(
            'keep_completed and keep_failed must not be negative (NULL keeps all), got %s and %s',
            coalesce(p_keep_completed::text, 'NULL'), coalesce(p_keep_failed::text, 'NULL')));
    END IF;
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues SET keep_completed = p_keep_completed, keep_failed = p_keep_failed
     WHERE name = p_queue;
END $$;

-- One row: the queue's bounds, or the defaults for a queue that does not exist yet (they
-- must equal the column defaults of lane.queues; tests/postgres/test_retention_sql.py).
CREATE OR REPLACE FUNCTION lane.get_queue_retention(p_queue text)
RETURNS TABLE (keep_completed integer, keep_failed integer) LANGUAGE sql STABLE AS $$
    SELECT q.keep_completed, q.keep_failed FROM lane.queues q WHERE q.name = p_queue
    UNION ALL
    SELECT 10000, 100000 WHERE NOT EXISTS (SELECT 1 FROM lane.queues q WHERE q.name = p_queue)
$$;

-- Deletes the finished jobs beyond each queue's bound (all queues when p_queues is NULL,
-- by name), with their logs, and returns how many jobs it deleted. Per queue and state
-- with a non-NULL keep: the cut-off is the row at position keep in newest-first order
-- (finished_at DESC, key DESC); at most p_batch rows at or before it go, oldest first, so
-- a caller repeats while a call deletes full batches. Rows another transaction holds are
-- skipped (the next call gets them): the maintenance leader never waits. No events, as
-- BullMQ's retention removal writes none. The literal `state IN (...)` lets a generic
-- plpgsql plan prove the partial index jobs_finished_idx; both lookups are ranges of it.
CREATE OR REPLACE FUNCTION lane.prune_finished(p_queues text[] DEFAULT NULL,
                                               p_batch integer DEFAULT 5000)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_queue text;
    v_keeps integer[];
    v_states text[] := ARRAY['completed', 'failed'];
    v_keep integer;
    v_cut_at timestamptz;
    v_cut_key bigint;
    v_doomed bigint[];
    v_logged bigint[];
    v_busy bigint[];
    v_deleted bigint;
    v_total bigint := 0;
BEGIN
    IF p_batch IS NULL OR p_batch < 1 THEN
        PERFORM lane._fail('LN003', format('batch must be at least 1, got %s', p_batch));
    END IF;
    FOR v_queue, v_keeps IN
        SELECT name, ARRAY[keep_completed, keep_failed] FROM lane.queues
         WHERE p_queues IS NULL OR name = ANY (p_queues) ORDER BY name
    LOOP
        FOR i IN 1 .. 2 LOOP
            v_keep := v_keeps[i];
            CONTINUE WHEN v_keep IS NULL;
            SELECT j.finished_at, j.key INTO v_cut_at, v_cut_key FROM lane.jobs j
             WHERE j.queue = v_queue AND j.state = v_states[i]
               AND j.state IN ('completed', 'failed')
             ORDER BY j.finished_at DESC, j.key DESC
            OFFSET v_keep LIMIT 1;
            CONTINUE WHEN NOT FOUND;
            v_doomed := ARRAY(
                SELECT j.key FROM lane.jobs j
                 WHERE j.queue = v_queue AND j.state = v_states[i]
                   AND j.state IN ('completed', 'failed')
                   AND (j.finished_at, j.key) <= (v_cut_at, v_cut_key)
                 ORDER BY j.finished_at, j.key
                 LIMIT p_batch
                   FOR UPDATE SKIP LOCKED);
            CONTINUE WHEN cardinality(v_doomed) = 0;
            -- Their log rows, one entry per row, through the log index: `(SELECT ...)` hides
            -- the array's length from the planner, which would otherwise read the whole
            -- log table for a few thousand keys (most finished jobs have no log).
            v_logged := ARRAY(SELECT l.job_key FROM lane.job_logs l
                               WHERE l.job_key = ANY ((SELECT v_doomed)::bigint[]));
            IF cardinality(v_logged) > 0 THEN
                -- Finish-time retention (lane._apply_retention) deletes log rows before
                -- their jobs: a job whose log rows another transaction holds is left to it,
                -- since waiting for them while holding the job row could deadlock with it.
                v_busy := ARRAY(
                    SELECT unnest(v_logged)
                    EXCEPT ALL
                    SELECT s.job_key FROM (SELECT l.job_key FROM lane.job_logs l
                                            WHERE l.job_key = ANY ((SELECT v_logged)::bigint[])
                                              FOR UPDATE SKIP LOCKED) s);
                IF cardinality(v_busy) > 0 THEN
                    v_doomed := ARRAY(SELECT unnest(v_doomed) EXCEPT SELECT unnest(v_busy));
                    v_logged := ARRAY(SELECT unnest(v_logged) EXCEPT SELECT unnest(v_busy));
                END IF;
                DELETE FROM lane.job_logs WHERE job_key = ANY ((SELECT v_logged)::bigint[]);
            END IF;
            DELETE FROM lane.jobs WHERE key = ANY (v_doomed);
            GET DIAGNOSTICS v_deleted = ROW_COUNT;
            v_total := v_total + v_deleted;
        END LOOP;
    END LOOP;
    RETURN v_total;
END $$;

-- ------------------------------------------------------------------ queue events

-- Whether the queue's job transitions write lane.events rows (ADD-9, CLAIM-1, FIN-1, ...;
-- on by default, the lane.queues column default). Off saves an INSERT per transition on
-- the hot path for queues nobody reads the stream of; the rows already written stay
-- readable (lane.read_events) and are trimmed as before (lane.trim_events).
CREATE OR REPLACE FUNCTION lane.set_queue_events(p_queue text, p_record boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF p_record IS NULL THEN
        PERFORM lane._fail('LN003', 'record_events must be true or false, got NULL');
    END IF;
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues SET record_events = p_record WHERE name = p_queue;
END $$;

-- true for a queue that does not exist yet (it will record when created).
CREATE OR REPLACE FUNCTION lane.queue_records_events(p_queue text)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT record_events FROM lane.queues WHERE name = p_queue), true)
$$;
