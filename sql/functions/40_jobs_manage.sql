-- lane_pg stored functions: Management of single jobs (MGMT).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

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
    -- Earlier than a sleeping worker's timer: wake it (lane._wake_for_due; probed before
    -- the move, so the job's old due time counts as the timer it replaces).
    PERFORM lane._wake_for_due(p_queue, v_now + p_delay_ms * interval '1 millisecond', v_now);
    -- The stored delay follows (MGMT-5), except on a repeat occurrence: its schedule is
    -- its delay, and its options become the series' template on a retry, which refuses
    -- delay_ms next to repeat (lane._check_options).
    UPDATE lane.jobs
       SET available_at = v_now + p_delay_ms * interval '1 millisecond',
           options = CASE WHEN repeat_key IS NULL
                          THEN options || jsonb_build_object('delay_ms', p_delay_ms)
                          ELSE options END
     WHERE key = v_key
    RETURNING * INTO v_job;
    PERFORM lane._emit(p_queue, 'delayed', p_id,
                       jsonb_build_object('delay', lane._epoch_ms(v_job.available_at)), v_now);
    RETURN v_job;
END $$;

-- MGMT-8. A job whose deduplication kind is 'unique' (push_unique) is retried as A9 says
-- for seed 003: its lock is neither taken back nor checked, the lock row (if any) is left
-- as it is, and the retried job carries no owner token, so nothing it does can free a lock
-- (a later push's, Laravel PR #59567); only the TTL ends the lock.
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
    -- DEDUP-13: before any write, so a conflict changes nothing.
    IF v_job.options -> 'deduplication' ->> 'kind' IS DISTINCT FROM 'unique' THEN
        PERFORM lane._dedup_reclaim(v_job, coalesce(p_now, clock_timestamp()));
    END IF;
    PERFORM lane._repeat_reclaim(v_job, coalesce(p_now, clock_timestamp()));  -- REP-15
    UPDATE lane.jobs
       SET failed_reason = NULL, return_value = NULL, processed_at = NULL, finished_at = NULL,
           attempts_made = 0, attempts_started = 0, stalled_count = 0, stacktrace = '{}',
           options = CASE WHEN options -> 'deduplication' ->> 'kind' = 'unique'
                          THEN options #- '{deduplication,token}' ELSE options END
     WHERE key = v_key;
    IF v_job.parent_id IS NOT NULL THEN
        PERFORM lane._flow_restore(v_job, coalesce(p_now, clock_timestamp()));  -- FLOW-27
    END IF;
    IF v_job.deps_pending > 0 THEN
        -- A parent whose children are pending again waits for them (FLOW-27).
        UPDATE lane.jobs SET state = 'waiting-children' WHERE key = v_key;
        PERFORM lane._emit(p_queue, 'waiting-children', p_id,
                           jsonb_build_object('prev', v_job.state),
                           coalesce(p_now, clock_timestamp()));
    ELSE
        PERFORM lane._make_waiting(ARRAY[v_key], v_job.state, coalesce(p_now, clock_timestamp()));
        PERFORM lane._wake(p_queue);
    END IF;
    SELECT * INTO v_job FROM lane.jobs WHERE key = v_key;
    RETURN v_job;
END $$;

-- The one removal of job rows, which the caller has locked and found removable, for
-- every path that removes jobs (42_cleanup.sql's too): writes `removed {prev}` for each,
-- in input order (one event row per queue and 1,024 jobs, migration 0007: a drain of
-- 20,000 jobs writes 20 rows); releases the dedup id (DEDUP-12: with any kept next job)
-- and the repeat series (REP-7) each one owns, only while the owner row names it; deletes
-- their logs and rows. A pending flow child is told to its parent (FLOW-26, FLOW-29,
-- MGMT-29: the parent is released in this transaction) and a parent's dependency rows go
-- with it. Keys of jobs that do not exist are ignored.
CREATE OR REPLACE FUNCTION lane._remove_jobs(p_keys bigint[], p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_children lane.jobs[];
    v_parents bigint[];
    v_batched bigint[];
    v_next_queues text[];
    v_next_ids text[];
    v_nexts jsonb[];
    v_i integer;
BEGIN
    IF coalesce(cardinality(p_keys), 0) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO lane.events (queue, event, datas, job_ids, created_at)
    SELECT j.queue, 'removed', array_agg(jsonb_build_object('prev', j.state) ORDER BY u.ord),
           array_agg(j.id ORDER BY u.ord), p_now
      FROM unnest(p_keys) WITH ORDINALITY AS u(key, ord)
      JOIN lane.jobs j ON j.key = u.key
      LEFT JOIN lane.queues q ON q.name = j.queue
     WHERE j.key = ANY (p_keys) AND coalesce(q.record_events, true)
     GROUP BY j.queue, (u.ord - 1) / 1024
     ORDER BY min(u.ord);
    -- A kept next job goes with its owner (DEDUP-12); a parent outside this removal that
    -- waited for it is told (DEDUP-18).
    WITH gone AS (
        DELETE FROM lane.dedup_owners o
         USING lane.jobs j
         WHERE j.key = ANY (p_keys) AND j.dedup_id IS NOT NULL
           AND o.queue = j.queue AND o.dedup_id = j.dedup_id AND o.job_key = j.key
        RETURNING o.queue, o.dedup_id, o.next_job)
    SELECT array_agg(g.queue ORDER BY g.queue, g.dedup_id),
           array_agg(g.dedup_id ORDER BY g.queue, g.dedup_id),
           array_agg(g.next_job ORDER BY g.queue, g.dedup_id)
      INTO v_next_queues, v_next_ids, v_nexts
      FROM gone g
     WHERE g.next_job ? 'parent' AND (g.next_job -> 'parent' ->> 'key')::bigint <> ALL (p_keys);
    FOR v_i IN 1 .. coalesce(cardinality(v_nexts), 0) LOOP
        PERFORM lane._dedup_next_dropped(v_next_queues[v_i], v_next_ids[v_i], v_nexts[v_i], p_now);
    END LOOP;
    DELETE FROM lane.repeat_schedulers s
     USING lane.jobs j
     WHERE j.key = ANY (p_keys) AND j.repeat_key IS NOT NULL
       AND s.queue = j.queue AND s.key = j.repeat_key AND s.job_key = j.key;
    -- One pass over the rows for both flow sides; a batch without flows finds nothing.
    SELECT array_agg(j ORDER BY j.key)
               FILTER (WHERE j.parent_id IS NOT NULL AND j.state NOT IN ('completed', 'failed')),
           array_agg(j.key) FILTER (WHERE j.deps_pending IS NOT NULL),
           array_agg(j.key) FILTER (WHERE j.batch_id IS NOT NULL
                                      AND j.state NOT IN ('completed', 'failed'))
      INTO v_children, v_parents, v_batched
      FROM lane.jobs j WHERE j.key = ANY (p_keys);
    IF v_children IS NOT NULL THEN
        PERFORM lane._flow_resolve(v_children, 'removed', p_now);
    END IF;
    IF v_parents IS NOT NULL THEN
        PERFORM lane._flow_forget(v_parents);
    END IF;
    IF v_batched IS NOT NULL THEN  -- BATCH-5: removed before it finished: settled, deleted
        PERFORM lane._batch_settle(v_batched, 'deleted', p_now);
    END IF;
    -- `(SELECT ...)` hides the array's length from the planner, which would otherwise read
    -- the whole log table for a few thousand keys (see lane.prune_finished).
    DELETE FROM lane.job_logs WHERE job_key = ANY ((SELECT p_keys)::bigint[]);
    DELETE FROM lane.jobs WHERE key = ANY (p_keys);
END $$;

-- MGMT-16: what is left naming the job (p_queue, p_id), which does not exist: the dedup
-- ids it owned (a TTL owner's row outlives a job retention deleted, DEDUP-5), each with
-- any kept next job (a parent waiting for one is told, DEDUP-18), the repeat series that
-- name it, and the log lines and dependency rows of its key: the keys those rows name,
-- and a generated id's own key (its text, migration 0008). Only rows of keys no job has.
CREATE OR REPLACE FUNCTION lane._forget_missing_job(p_queue text, p_id text,
                                                    p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_keys bigint[] := CASE WHEN p_id ~ '^[1-9][0-9]{0,17}$' THEN ARRAY[p_id::bigint]
                            ELSE '{}' END;
    v_owner record;
BEGIN
    FOR v_owner IN
        WITH gone AS (
            DELETE FROM lane.dedup_owners o
             WHERE o.queue = p_queue AND o.job_id = p_id
               AND NOT EXISTS (SELECT FROM lane.jobs j WHERE j.key = o.job_key)
            RETURNING o.dedup_id, o.job_key, o.next_job)
        SELECT * FROM gone ORDER BY dedup_id
    LOOP
        v_keys := v_keys || v_owner.job_key;
        PERFORM lane._dedup_next_dropped(p_queue, v_owner.dedup_id, v_owner.next_job, p_now);
    END LOOP;
    WITH gone AS (
        DELETE FROM lane.repeat_schedulers s
         WHERE s.queue = p_queue AND s.job_id = p_id
           AND NOT EXISTS (SELECT FROM lane.jobs j WHERE j.key = s.job_key)
        RETURNING s.job_key)
    SELECT v_keys || coalesce(array_agg(g.job_key), '{}') INTO v_keys FROM gone g;
    v_keys := ARRAY(SELECT DISTINCT k FROM unnest(v_keys) k
                     WHERE k IS NOT NULL AND NOT EXISTS (SELECT FROM lane.jobs j WHERE j.key = k));
    IF cardinality(v_keys) > 0 THEN
        DELETE FROM lane.job_logs WHERE job_key = ANY (v_keys);
        PERFORM lane._flow_forget(v_keys);
    END IF;
END $$;

-- MGMT-16: a live lease protects a job; an expired one does not. A missing job: false,
-- after what is left naming it is cleaned (lane._forget_missing_job).
CREATE OR REPLACE FUNCTION lane.remove_job(p_queue text, p_id text, p_now timestamptz DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_job lane.jobs;
BEGIN
    SELECT * INTO v_job FROM lane.jobs WHERE key = lane._find_key(p_queue, p_id) FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM lane._forget_missing_job(p_queue, p_id, v_now);
        RETURN false;
    END IF;
    IF v_job.state = 'active' AND v_job.lease_expires_at >= v_now THEN
        PERFORM lane._fail('LN007', format(
            'job %s is active under a lease until %s: it cannot be removed',
            p_id, v_job.lease_expires_at));
    END IF;
    PERFORM lane._remove_jobs(ARRAY[v_job.key], v_now);
    RETURN true;
END $$;

-- MGMT-10. With p_token (a run's write, from its job context) the job must be active
-- under exactly that token, else LN005 and nothing is written; NULL is an administrator's
-- call on any retained job (lane._writable_job_key).
CREATE OR REPLACE FUNCTION lane.update_job_data(p_queue text, p_id text, p_data jsonb,
                                                p_token uuid DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint := lane._writable_job_key(p_queue, p_id, p_token);
    v_job lane.jobs;
BEGIN
    UPDATE lane.jobs SET data = coalesce(p_data, 'null'::jsonb)
     WHERE key = v_key
    RETURNING * INTO v_job;
    RETURN v_job;
END $$;

-- MGMT-11; p_token as for update_job_data.
CREATE OR REPLACE FUNCTION lane.update_job_progress(p_queue text, p_id text, p_progress jsonb,
                                                    p_now timestamptz DEFAULT NULL,
                                                    p_token uuid DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint := lane._writable_job_key(p_queue, p_id, p_token);
    v_job lane.jobs;
BEGIN
    UPDATE lane.jobs SET progress = coalesce(p_progress, 'null'::jsonb)
     WHERE key = v_key
    RETURNING * INTO v_job;
    PERFORM lane._emit(p_queue, 'progress', p_id,
                       jsonb_build_object('data', v_job.progress), coalesce(p_now, clock_timestamp()));
    RETURN v_job;
END $$;

-- MGMT-12: replaces a retained job's stack trace list and failure reason together, in any
-- state (NULL: an empty list, no reason); no event. LN003 for a NULL entry in the list.
CREATE OR REPLACE FUNCTION lane.save_job_stacktrace(p_queue text, p_id text, p_stacktrace text[],
                                                    p_failed_reason text)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint;
    v_job lane.jobs;
BEGIN
    IF array_position(p_stacktrace, NULL) IS NOT NULL THEN
        PERFORM lane._fail('LN003', 'a stack trace entry must be text, got NULL');
    END IF;
    v_key := lane._job_key(p_queue, p_id);
    UPDATE lane.jobs SET stacktrace = coalesce(p_stacktrace, '{}'), failed_reason = p_failed_reason
     WHERE key = v_key
    RETURNING * INTO v_job;
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
    IF p_priority IS NULL OR p_priority NOT BETWEEN 0 AND lane._max_priority() THEN
        PERFORM lane._fail('LN002', format(
            'priority must be an integer between 0 and %s, got %s', lane._max_priority(),
            p_priority));
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
