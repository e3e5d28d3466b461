-- lane_pg stored functions: State transitions shared by several operations: to waiting, promotion, retention, drained, terminal failure.
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

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
        -- One event row per queue and 1,024 jobs (migration 0007).
        INSERT INTO lane.events (queue, event, data, job_ids, created_at)
        SELECT j.queue, 'waiting', jsonb_build_object('prev', p_prev),
               array_agg(j.id ORDER BY u.ord), p_now
          FROM unnest(p_keys) WITH ORDINALITY AS u(key, ord)
          JOIN lane.jobs j ON j.key = u.key
          LEFT JOIN lane.queues q ON q.name = j.queue
         WHERE j.key = ANY (p_keys) AND coalesce(q.record_events, true)
         GROUP BY j.queue, (u.ord - 1) / 1024
         ORDER BY min(u.ord);
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
                   AND state IN ('completed', 'failed')  -- jobs_finished_idx, generic plan too
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
                   AND state IN ('completed', 'failed')
                 ORDER BY finished_at DESC, key DESC
                OFFSET v_count);
        END IF;
    END IF;
    IF cardinality(v_doomed) > 0 THEN
        DELETE FROM lane.job_logs WHERE job_key = ANY (v_doomed);
        WITH gone AS (DELETE FROM lane.jobs WHERE key = ANY (v_doomed)
                      RETURNING key, deps_pending)
        SELECT array_agg(key) FILTER (WHERE deps_pending IS NOT NULL) INTO v_doomed FROM gone;
        IF v_doomed IS NOT NULL THEN
            PERFORM lane._flow_forget(v_doomed);  -- a finished parent's results go with it
        END IF;
    END IF;
END $$;

-- FIN-7: `drained` when the queue has no waiting and no active job left.
-- Each probe is an ordered LIMIT 1 that only its partial index can answer without a sort
-- (the claim's own order on jobs_waiting_idx, the lease order on jobs_lease_idx), so the
-- plan never depends on the statistics. A plain EXISTS let the planner pick a seq scan
-- or jobs_queue_state_idx: mid-drain they walked every claimed and completed row version
-- still in the table (8,229 rows, 1.2 ms per completion batch, 60 % of complete_jobs'
-- time in W3); the index walks skip those dead entries at ~5 us a page.
CREATE OR REPLACE FUNCTION lane._drained_check(p_queue text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM lane.jobs WHERE queue = p_queue AND state = 'waiting'
     ORDER BY order_key, key LIMIT 1;
    IF FOUND THEN
        PERFORM lane._wake_if_capped(p_queue);  -- CLAIM-9 (52_limits.sql)
        RETURN;
    END IF;
    PERFORM 1 FROM lane.jobs WHERE state = 'active' AND queue = p_queue
     ORDER BY lease_expires_at LIMIT 1;
    IF NOT FOUND THEN
        PERFORM lane._emit(p_queue, 'drained', NULL, '{}', p_now);
    END IF;
END $$;

-- Terminal failure of one locked job (FIN-4, FIN-6, STALL-3): state, events, retention,
-- metrics, drained. p_prev is the state it leaves.
-- With p_record_connection, the failure is also recorded in lane.failed_jobs (FAIL-2, A4:
-- same transaction), naming the job's stored connection label, else that one;
-- p_exception is the record's exception text (default: p_reason).
CREATE OR REPLACE FUNCTION lane._fail_terminal(p_key bigint, p_reason text, p_now timestamptz,
                                               p_record_connection text DEFAULT NULL,
                                               p_exception text DEFAULT NULL)
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
    IF p_record_connection IS NOT NULL THEN  -- before retention may delete the row (RET-7)
        PERFORM lane._record_failed_job(v_job, p_record_connection,
                                        coalesce(p_exception, p_reason), p_now);
    END IF;
    IF v_job.attempts_made >= v_job.max_attempts THEN
        PERFORM lane._emit(v_job.queue, 'retries-exhausted', v_job.id,
                           jsonb_build_object('attemptsMade', v_job.attempts_made), p_now);
    END IF;
    IF v_job.dedup_id IS NOT NULL THEN
        PERFORM lane._dedup_finish(ARRAY[v_job.key], p_now);  -- DEDUP-3..10, before retention
    END IF;
    IF v_job.repeat_key IS NOT NULL THEN
        PERFORM lane._repeat_release(v_job);  -- REP-7: a failed owner ends its series
    END IF;
    IF v_job.parent_id IS NOT NULL THEN
        -- FLOW-5..10 on every path to a terminal failure (fail_job, discard, stalled
        -- recovery: STALL-4), before remove_on_fail may delete the row (BullMQ #1752).
        PERFORM lane._flow_resolve(ARRAY[v_job], 'failed', p_now);
    END IF;
    IF v_job.batch_id IS NOT NULL THEN  -- BATCH-5, before retention
        PERFORM lane._batch_settle(ARRAY[v_job.key], 'failed', p_now);
    END IF;
    IF v_job.options ? 'chain' THEN  -- CHAIN-1: the chain ends here
        PERFORM lane._chain_broken(v_job, p_now);
    END IF;
    PERFORM lane._apply_retention(v_job.queue, 'failed', v_job.options -> 'remove_on_fail',
                                  v_job.key, 1, p_now);
    PERFORM lane._count_finished(v_job.queue, 'failed', 1, p_now);  -- OBS-6
    PERFORM lane._drained_check(v_job.queue, p_now);
    RETURN v_job;
END $$;
