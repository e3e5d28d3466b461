-- lane_pg stored functions: Finishing: completion, failure and retry, release, delay (FIN, RETRY).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

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
    v_owners boolean;
    v_series boolean;
    v_grouped boolean;
    v_child_keys bigint[];
    v_child_values jsonb[];
    v_queue text;
    v_last_queue text;
    v_row record;
    v_parents bigint[];
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
           -- FIN-8: a flow parent completes only once no child is pending or failing it
           -- (a child failure that fails a parent not yet failed sets deferred_failure).
           AND CASE WHEN j.deps_pending IS NULL THEN true
                    ELSE j.deps_pending <= 0 AND j.deferred_failure IS NULL END
        RETURNING j AS job, i.ord
    )
    SELECT array_agg(d.job ORDER BY d.ord), array_agg(d.ord ORDER BY d.ord),
           bool_or((d.job).dedup_id IS NOT NULL), bool_or((d.job).repeat_key IS NOT NULL),
           bool_or((d.job).batch_id IS NOT NULL OR (d.job).options ? 'chain'),
           -- A flow child's key and value as arrays here: unnesting the job rows again in
           -- lane._flow_complete cost ~100 us a batch of 50 children; a plain batch pays
           -- the two FILTERs (no difference measured).
           array_agg((d.job).key ORDER BY d.ord) FILTER (WHERE (d.job).parent_id IS NOT NULL),
           array_agg(coalesce((d.job).return_value, 'null'::jsonb) ORDER BY d.ord)
               FILTER (WHERE (d.job).parent_id IS NOT NULL),
           min((d.job).queue), max((d.job).queue)
      INTO v_done, v_ords, v_owners, v_series, v_grouped, v_child_keys, v_child_values, v_queue,
           v_last_queue
      FROM done d;
    IF v_done IS NULL THEN
        RETURN;
    END IF;

    -- Only for the queues that record events.
    -- One event row per queue and 1,024 jobs (migration 0007).
    INSERT INTO lane.events (queue, event, datas, job_ids, created_at)
    SELECT d.queue, 'completed',
           array_agg(jsonb_build_object('prev', 'active', 'returnvalue', d.return_value)
                     ORDER BY d.ordinality),
           array_agg(d.id ORDER BY d.ordinality), p_now
      FROM unnest(v_done) WITH ORDINALITY AS d
      LEFT JOIN lane.queues q ON q.name = d.queue
     WHERE coalesce(q.record_events, true)
     GROUP BY d.queue, (d.ordinality - 1) / 1024
     ORDER BY min(d.ordinality);
    -- DEDUP-3..10, after the `completed` events (a kept next job's `added` follows them)
    -- and before retention may delete the rows; a batch of plain jobs pays only the
    -- bool_or above.
    IF v_owners THEN
        PERFORM lane._dedup_finish(ARRAY(SELECT d.key FROM unnest(v_done) d
                                          WHERE d.dedup_id IS NOT NULL), p_now);
    END IF;
    IF v_series THEN  -- REP-2..4: the next occurrence, in this transaction
        PERFORM lane._repeat_finish(ARRAY(SELECT d.key FROM unnest(v_done) d
                                           WHERE d.repeat_key IS NOT NULL), p_now);
    END IF;
    IF v_child_keys IS NOT NULL THEN  -- FLOW-3, FLOW-4: values under their parents, fan-in
        PERFORM lane._flow_complete(v_child_keys, v_child_values, p_now);
    END IF;
    IF v_grouped THEN  -- BATCH-5, CHAIN-4: settlements and next links, in this transaction
        PERFORM lane._batch_settle(ARRAY(SELECT d.key FROM unnest(v_done) d
                                          WHERE d.batch_id IS NOT NULL), 'completed', p_now);
        PERFORM lane._chain_advance(v_done, p_now);
    END IF;
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
            WITH gone AS (
                DELETE FROM lane.jobs WHERE key IN (
                    SELECT d.key FROM unnest(v_done) d
                     WHERE d.queue = v_row.queue
                       AND d.options -> 'remove_on_complete' = 'true'::jsonb)
                RETURNING key, deps_pending)
            SELECT array_agg(key) FILTER (WHERE deps_pending IS NOT NULL) INTO v_parents
              FROM gone;
            IF v_parents IS NOT NULL THEN
                PERFORM lane._flow_forget(v_parents);
            END IF;
        ELSE
            PERFORM lane._apply_retention(v_row.queue, 'completed', v_row.policy, v_row.key,
                                          v_row.n, p_now);
        END IF;
    END LOOP;
    -- OBS-6: into this connection's row (75_metrics.sql says why); a batch is of one
    -- queue but for a caller's mixed one, which is counted per queue in one lock order.
    IF v_queue = v_last_queue THEN
        PERFORM lane._count_finished(v_queue, 'completed', cardinality(v_done), p_now);
    ELSE
        FOR v_row IN SELECT d.queue, count(*) AS n FROM unnest(v_done) d GROUP BY 1 ORDER BY 1
        LOOP
            PERFORM lane._count_finished(v_row.queue, 'completed', v_row.n, p_now);
        END LOOP;
    END IF;
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
                WHEN EXISTS (SELECT 1 FROM lane.jobs j
                              WHERE j.key = lane._find_key(i.queue, i.id) AND j.state = 'active'
                                AND j.lock_token = p_tokens[i.ord] AND j.deps_pending IS NOT NULL)
                     THEN 'pending_dependencies'  -- FIN-8: still held, still active
                WHEN lane._find_key(i.queue, i.id) IS NOT NULL
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
    v_job := lane._owned_job(p_queue, p_id, p_token);
    IF v_job.deps_pending IS NOT NULL THEN
        IF v_job.deps_pending > 0 OR v_job.deferred_failure IS NOT NULL THEN
            PERFORM lane._fail('LN008', format(
                'job %s of queue %s cannot complete: %s of its children are pending%s',
                p_id, p_queue, v_job.deps_pending,
                CASE WHEN v_job.deferred_failure IS NOT NULL
                     THEN ' and ' || v_job.deferred_failure ELSE '' END));
        END IF;
    END IF;
    SELECT (d.job).* INTO v_job
      FROM lane._complete(ARRAY[p_queue], ARRAY[p_id], ARRAY[p_token], ARRAY[p_result],
                          coalesce(p_now, clock_timestamp())) d;
    RETURN v_job;
END $$;

-- FIN-3..5: one failure; NULL when the job is missing or not held under p_token.
CREATE OR REPLACE FUNCTION lane._fail_one(p_queue text, p_id text, p_token uuid, p_reason text,
                                          p_stacktrace text, p_discard boolean,
                                          p_now timestamptz,
                                          p_stacktrace_limit integer DEFAULT NULL,
                                          p_failed_store_connection text DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs;
    v_delay bigint;
BEGIN
    UPDATE lane.jobs
       SET attempts_made = attempts_made + 1, failed_reason = p_reason,
           -- WORK-14: the newest p_stacktrace_limit tracebacks (all when NULL).
           stacktrace = CASE WHEN p_stacktrace IS NULL THEN stacktrace
                             WHEN p_stacktrace_limit IS NULL THEN stacktrace || p_stacktrace
                             WHEN p_stacktrace_limit <= 0 THEN '{}'
                             ELSE (stacktrace || p_stacktrace)[greatest(cardinality(stacktrace) + 2
                                                                       - p_stacktrace_limit, 1):]
                        END,
           lock_token = NULL, lease_expires_at = NULL
     WHERE key = lane._find_key(p_queue, p_id) AND state = 'active' AND lock_token = p_token
    RETURNING * INTO v_job;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF coalesce(p_discard, false) OR v_job.attempts_made >= v_job.max_attempts THEN
        -- FAIL-2: the record's exception is the traceback the worker sent, else the reason.
        RETURN lane._fail_terminal(v_job.key, p_reason, p_now, p_failed_store_connection,
                                   coalesce(p_stacktrace, p_reason));
    END IF;
    v_delay := lane._backoff_ms(v_job.backoff, v_job.attempts_made);
    IF v_delay > 0 THEN
        -- The retry may be due before a sleeping worker's timer (lane._wake_for_due).
        PERFORM lane._wake_for_due(p_queue, p_now + v_delay * interval '1 millisecond', p_now);
        UPDATE lane.jobs SET state = 'delayed',
                             available_at = p_now + v_delay * interval '1 millisecond'
         WHERE key = v_job.key
        RETURNING * INTO v_job;
        PERFORM lane._emit(p_queue, 'delayed', p_id,
                           jsonb_build_object('delay', lane._epoch_ms(v_job.available_at),
                                              'prev', 'active', 'failedReason', p_reason), p_now);
        PERFORM lane._wake_if_capped(p_queue);  -- CLAIM-9: its slot is free
    ELSE
        PERFORM lane._make_waiting(ARRAY[v_job.key], 'active', p_now);
        PERFORM lane._wake(p_queue);
        SELECT * INTO v_job FROM lane.jobs WHERE key = v_job.key;
    END IF;
    RETURN v_job;
END $$;

-- p_failed_store_connection (FAIL-2, A4): a worker whose failed store is this database
-- passes its connection name, and every item failing for good is recorded in
-- lane.failed_jobs in this transaction (lane._fail_terminal); NULL records nothing.
CREATE OR REPLACE FUNCTION lane.fail_jobs(p_queues text[], p_ids text[], p_tokens uuid[],
                                          p_reasons text[], p_stacktraces text[],
                                          p_discards boolean[], p_now timestamptz DEFAULT NULL,
                                          p_stacktrace_limits integer[] DEFAULT NULL,
                                          p_failed_store_connection text DEFAULT NULL)
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
                                p_stacktraces[v_i], p_discards[v_i], v_now,
                                p_stacktrace_limits[v_i], p_failed_store_connection);
        ord := v_i;
        queue := p_queues[v_i];
        id := p_ids[v_i];
        state := v_job.state;
        IF v_job.key IS NOT NULL THEN
            status := 'ok';
        ELSIF lane._find_key(p_queues[v_i], p_ids[v_i]) IS NOT NULL THEN
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
                                         p_now timestamptz DEFAULT NULL,
                                         p_stacktrace_limit integer DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._owned_job(p_queue, p_id, p_token);
    RETURN lane._fail_one(p_queue, p_id, p_token, p_reason, p_stacktrace, p_discard_retry,
                          coalesce(p_now, clock_timestamp()), p_stacktrace_limit);
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
    PERFORM lane._wake_for_due(p_queue, v_now + p_delay_ms * interval '1 millisecond', v_now);
    UPDATE lane.jobs
       SET state = 'delayed', available_at = v_now + p_delay_ms * interval '1 millisecond',
           lock_token = NULL, lease_expires_at = NULL
     WHERE key = v_job.key
    RETURNING * INTO v_job;
    PERFORM lane._emit(p_queue, 'delayed', p_id,
                       jsonb_build_object('delay', lane._epoch_ms(v_job.available_at),
                                          'prev', 'active'), v_now);
    PERFORM lane._wake_if_capped(p_queue);  -- CLAIM-9: its slot is free
    RETURN v_job;
END $$;

-- A2, A14: a claim handed back without running (a worker with no processor for the job's
-- name, a driver's Release): as release_job (p_delay_ms 0) or delay_job, and the claim's
-- attempt given back (attempts_started - 1), so a job bouncing between workers that cannot
-- run it never spends its budget (STALL-7). attempts_made and stalled_count are untouched.
CREATE OR REPLACE FUNCTION lane.give_back_job(p_queue text, p_id text, p_token uuid,
                                              p_delay_ms bigint DEFAULT 0,
                                              p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs;
BEGIN
    IF p_delay_ms IS NULL OR p_delay_ms < 0 THEN
        PERFORM lane._fail('LN003', format('delay must not be negative, got %s ms', p_delay_ms));
    END IF;
    IF p_delay_ms = 0 THEN
        v_job := lane.release_job(p_queue, p_id, p_token, p_now);
    ELSE
        v_job := lane.delay_job(p_queue, p_id, p_token, p_delay_ms, p_now);
    END IF;
    UPDATE lane.jobs SET attempts_started = greatest(attempts_started - 1, 0)
     WHERE key = v_job.key
    RETURNING * INTO v_job;
    RETURN v_job;
END $$;

-- MW-2: a middleware's Deleted outcome (Skip, WithoutOverlapping.dont_release): the run's
-- job is removed as any removal is, through lane._remove_jobs (`removed {prev: active}`, a
-- flow parent told), without a failed record. Token-checked: LN004 / LN005 otherwise.
CREATE OR REPLACE FUNCTION lane.discard_job(p_queue text, p_id text, p_token uuid,
                                            p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs := lane._owned_job(p_queue, p_id, p_token);
BEGIN
    PERFORM lane._remove_jobs(ARRAY[v_job.key], coalesce(p_now, clock_timestamp()));
    PERFORM lane._wake_if_capped(p_queue);  -- CLAIM-9: its slot is free
END $$;
