-- lane_pg stored functions: Maintenance run by the workers' leader: stalled recovery, promotion, pruning (STALL, RET).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

-- STALL-1..3, STALL-5, STALL-6: one pass over expired leases. The lease column is authoritative,
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
        -- STALL-5: the owner of a repeat series is requeued whatever its stall count, and
        -- keeps the series: failing it would end the schedule (REP-7). An active job that
        -- the series row names is its owner (lane._repeat_owner's other checks hold).
        IF v_job.stalled_count > coalesce(p_max_stalled_count, 1)
           AND NOT (v_job.repeat_key IS NOT NULL AND EXISTS (
                    SELECT 1 FROM lane.repeat_schedulers r
                     WHERE r.queue = v_job.queue AND r.key = v_job.repeat_key
                       AND r.job_key = v_job.key)) THEN
            -- FAIL-2: a typed job (its push stored options.meta.connection) is recorded in
            -- lane.failed_jobs: no worker is left whose failed store could (docs/decisions.md).
            PERFORM lane._fail_terminal(v_job.key, 'job stalled more than allowable limit', v_now,
                                        lane._failed_job_connection(v_job, NULL));
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
            WITH gone AS (DELETE FROM lane.jobs WHERE key = ANY (v_doomed)
                          RETURNING key, deps_pending)
            SELECT count(*), array_agg(key) FILTER (WHERE deps_pending IS NOT NULL)
              INTO v_deleted, v_doomed FROM gone;
            IF v_doomed IS NOT NULL THEN
                PERFORM lane._flow_forget(v_doomed);  -- a finished parent's results
            END IF;
            v_total := v_total + v_deleted;
        END LOOP;
    END LOOP;
    RETURN v_total;
END $$;
