-- lane_pg stored functions: Batches (BATCH-*): jobs dispatched together, settled one by one,
-- with callbacks enqueued as jobs when the batch fails first and when it finishes.
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- Counts are never stored: pending = total_jobs - settlements, failed = failed settlements
-- (BATCH-5). A job's settlement row is written by lane._batch_settle in the transaction that
-- ends it, on every path: completion (lane._complete), terminal failure (lane._fail_terminal:
-- fail_job, discard, stalled recovery, a failed flow child's parent) and removal of an
-- unfinished job (lane._remove_jobs: remove, clean, drain, obliterate, a middleware's
-- delete). The primary key makes a second settlement of one job a no-op (a retried job
-- keeps its first). Callbacks are jobs named lane_pg:batch_callback with the id
-- batch-<id>-<kind>, added in the settling transaction: a worker that dies after settling
-- the last job cannot lose them, and a repeat cannot double them.

-- The options document of a batch: the callbacks' names and where their jobs go.
CREATE OR REPLACE FUNCTION lane._check_batch_options(p_options jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_key text;
    v_value jsonb;
BEGIN
    IF p_options IS NULL OR jsonb_typeof(p_options) <> 'object' THEN
        PERFORM lane._fail('LN003', format('batch options must be a JSON object, got %s',
                                           coalesce(p_options::text, 'NULL')));
    END IF;
    FOR v_key, v_value IN SELECT o.key, o.value FROM jsonb_each(p_options) o LOOP
        IF v_key IN ('then', 'catch', 'finally') THEN
            IF jsonb_typeof(v_value) <> 'string' OR length(v_value #>> '{}') NOT BETWEEN 1 AND 255 THEN
                PERFORM lane._fail('LN003', format(
                    'batch option %s names a registered callback: 1-255 characters, got %s',
                    v_key, v_value));
            END IF;
        ELSIF v_key = 'allow_failures' THEN
            IF jsonb_typeof(v_value) <> 'boolean' THEN
                PERFORM lane._fail('LN003', format(
                    'batch option allow_failures must be true or false, got %s', v_value));
            END IF;
        ELSIF v_key = 'callback_queue' THEN
            IF jsonb_typeof(v_value) <> 'string' THEN
                PERFORM lane._fail('LN003', format(
                    'batch option callback_queue must be a queue name, got %s', v_value));
            END IF;
            PERFORM lane._check_queue(v_value #>> '{}');
        ELSIF v_key = 'callback_options' THEN
            PERFORM lane._check_options(v_value);
            IF v_value ?| ARRAY['job_id', 'deduplication', 'repeat'] THEN
                PERFORM lane._fail('LN003',
                    'batch option callback_options takes no job_id, deduplication or repeat:'
                    ' a callback job has the id batch-<id>-<kind>');
            END IF;
        ELSIF v_key = 'meta' THEN
            PERFORM lane._check_option_meta(v_value);
        ELSE
            PERFORM lane._fail('LN003', format(
                'unknown batch option %L: known options are allow_failures, callback_options,'
                ' callback_queue, catch, finally, meta, then', v_key));
        END IF;
    END LOOP;
END $$;

-- A batch's or chain's specs come as four arrays of one length (p_what names the group).
CREATE OR REPLACE FUNCTION lane._check_spec_arrays(p_what text, p_queues text[], p_names text[],
                                                   p_datas jsonb[], p_options jsonb[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_names), 0);
BEGIN
    IF coalesce(cardinality(p_queues), 0) <> v_n OR coalesce(cardinality(p_datas), 0) <> v_n
       OR coalesce(cardinality(p_options), 0) <> v_n THEN
        PERFORM lane._fail('LN003', format(
            'a %s takes as many queues, datas and options as names (%s names, %s queues,'
            ' %s datas, %s options)', p_what, v_n, coalesce(cardinality(p_queues), 0),
            coalesce(cardinality(p_datas), 0), coalesce(cardinality(p_options), 0)));
    END IF;
END $$;

-- Stores the specs of a batch's jobs, each in its queue, stamped with the batch: the
-- batch_id column (settlements) and options.meta.batch_id (what a worker reads). Returns
-- their ids in input order. A batch's job takes no custom id, deduplication or repeat:
-- each would let the add return another job, which the batch would then claim as its own.
CREATE OR REPLACE FUNCTION lane._batch_store(p_batch uuid, p_queues text[], p_names text[],
                                             p_datas jsonb[], p_options jsonb[],
                                             p_now timestamptz)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_names), 0);
    v_queue text;
    v_positions integer[];
    v_keys bigint[];
    v_all_keys bigint[] := '{}';
    v_all_positions integer[] := '{}';
    v_i integer;
BEGIN
    PERFORM lane._check_spec_arrays('batch', p_queues, p_names, p_datas, p_options);
    FOR v_i IN 1 .. v_n LOOP
        IF p_options[v_i] ?| ARRAY['job_id', 'deduplication', 'repeat'] THEN
            PERFORM lane._fail('LN003', format(
                'job %s of the batch (%s): a batch''s jobs take no job_id, deduplication or'
                ' repeat option', v_i, p_names[v_i]));
        END IF;
    END LOOP;
    -- One bulk store per queue, queues in first-appearance order.
    FOR v_queue IN SELECT q FROM unnest(p_queues) WITH ORDINALITY AS u(q, ord)
                    GROUP BY q ORDER BY min(ord) LOOP
        v_positions := ARRAY(SELECT ord::integer FROM unnest(p_queues) WITH ORDINALITY AS u(q, ord)
                              WHERE q = v_queue ORDER BY ord);
        v_keys := (lane._store_jobs(
            v_queue,
            ARRAY(SELECT p_names[p] FROM unnest(v_positions) p),
            ARRAY(SELECT p_datas[p] FROM unnest(v_positions) p),
            lane._checked_specs(v_queue, ARRAY(SELECT p_names[p] FROM unnest(v_positions) p),
                                ARRAY(SELECT p_datas[p] FROM unnest(v_positions) p),
                                ARRAY(SELECT coalesce(p_options[p], '{}') FROM unnest(v_positions) p)),
            p_now)).keys;
        v_all_keys := v_all_keys || v_keys;
        v_all_positions := v_all_positions || v_positions;
    END LOOP;
    UPDATE lane.jobs j
       SET batch_id = p_batch,
           options = j.options || jsonb_build_object(
               'meta', coalesce(j.options -> 'meta', '{}') || jsonb_build_object('batch_id', p_batch))
     WHERE j.key = ANY (v_all_keys);
    RETURN ARRAY(SELECT j.id FROM unnest(v_all_keys, v_all_positions) AS u(key, pos)
                   JOIN lane.jobs j ON j.key = u.key
                  WHERE j.key = ANY (v_all_keys)
                  ORDER BY u.pos);
END $$;

-- BATCH-1: a batch and all its jobs in one transaction (a failing job spec adds nothing:
-- no partial batch). p_options: then / catch / finally (callback names), allow_failures,
-- callback_queue (default: the first job's queue, else 'default'), callback_options (the
-- callback jobs' options), meta. Jobs are available at once unless their options delay
-- them. An empty batch is finished at once (its then and finally are enqueued). Returns
-- the jobs' ids in input order.
CREATE OR REPLACE FUNCTION lane.add_batch(p_id uuid, p_name text, p_options jsonb,
                                          p_queues text[], p_names text[], p_datas jsonb[],
                                          p_job_options jsonb[],
                                          p_now timestamptz DEFAULT NULL)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_options jsonb := coalesce(p_options, '{}');
    v_ids text[];
    v_batch lane.batches;
BEGIN
    IF p_id IS NULL THEN
        PERFORM lane._fail('LN003', 'a batch needs an id');
    END IF;
    IF p_name IS NULL OR length(p_name) > 255 THEN
        PERFORM lane._fail('LN003', 'a batch name is text of at most 255 characters');
    END IF;
    PERFORM lane._check_batch_options(v_options);
    IF NOT v_options ? 'callback_queue' THEN
        v_options := v_options || jsonb_build_object('callback_queue',
                                                     coalesce(p_queues[1], 'default'));
    END IF;
    INSERT INTO lane.batches (id, name, total_jobs, options, created_at)
    VALUES (p_id, p_name, coalesce(cardinality(p_names), 0), v_options, v_now)
    ON CONFLICT (id) DO NOTHING
    RETURNING * INTO v_batch;
    IF NOT FOUND THEN
        PERFORM lane._fail('LN006', format('batch %s exists already', p_id));
    END IF;
    v_ids := lane._batch_store(p_id, p_queues, p_names, p_datas, p_job_options, v_now);
    IF v_batch.total_jobs = 0 THEN
        PERFORM lane._batch_progress(v_batch, 0, v_now);
    END IF;
    RETURN v_ids;
END $$;

-- Jobs added to a batch that has not finished (a batch job adding more work to its own
-- batch): the total grows in the same transaction. A finished batch is refused, so a then
-- callback that adds to its own batch cannot start it over (Laravel #38804).
CREATE OR REPLACE FUNCTION lane.add_to_batch(p_id uuid, p_queues text[], p_names text[],
                                             p_datas jsonb[], p_job_options jsonb[],
                                             p_now timestamptz DEFAULT NULL)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_batch lane.batches;
BEGIN
    SELECT * INTO v_batch FROM lane.batches WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM lane._fail('LN030', format('batch %s not found', p_id));
    END IF;
    IF v_batch.finished_at IS NOT NULL THEN
        PERFORM lane._fail('LN006', format(
            'batch %s finished at %s: no job can be added to it', p_id, v_batch.finished_at));
    END IF;
    UPDATE lane.batches SET total_jobs = total_jobs + coalesce(cardinality(p_names), 0)
     WHERE id = p_id;
    RETURN lane._batch_store(p_id, p_queues, p_names, p_datas, p_job_options, v_now);
END $$;

-- Settles the batch jobs among p_keys (rows still present, locked by the caller) with
-- p_outcome ('completed', 'failed' or 'deleted'; a job's failed_reason is kept with a
-- failure). Batches are locked in id order, here and nowhere else before a settlement,
-- so two transactions settling jobs of the same batches wait for each other instead of
-- deadlocking; the lock also makes the count each one reads include the other's rows,
-- so exactly one of them sees the batch finish.
CREATE OR REPLACE FUNCTION lane._batch_settle(p_keys bigint[], p_outcome text,
                                              p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_batch lane.batches;
    v_new_failed integer;
BEGIN
    FOR v_batch IN
        SELECT b.* FROM lane.batches b
         WHERE b.id IN (SELECT j.batch_id FROM lane.jobs j
                         WHERE j.key = ANY (p_keys) AND j.batch_id IS NOT NULL)
         ORDER BY b.id FOR UPDATE OF b
    LOOP
        WITH settled AS (
            INSERT INTO lane.batch_settlements AS s
                   (batch_id, job_queue, job_id, outcome, settled_at, reason)
            SELECT v_batch.id, j.queue, j.id, p_outcome, p_now,
                   CASE WHEN p_outcome = 'failed' THEN j.failed_reason END
              FROM lane.jobs j
             WHERE j.key = ANY (p_keys) AND j.batch_id = v_batch.id
             ORDER BY j.key
            ON CONFLICT DO NOTHING
            RETURNING s.outcome)
        SELECT count(*) FILTER (WHERE outcome = 'failed') INTO v_new_failed FROM settled;
        PERFORM lane._batch_progress(v_batch, v_new_failed, p_now);
    END LOOP;
END $$;

-- After a settlement of a locked batch: the first failure cancels it (unless it allows
-- failures) and enqueues catch; the last settlement finishes it and enqueues then (no
-- failure and not cancelled: a cancelled batch did not succeed) and finally. p_new_failed: the failures this settlement wrote. The batch row is
-- locked, so the counts include every settlement committed before this one.
CREATE OR REPLACE FUNCTION lane._batch_progress(p_batch lane.batches, p_new_failed integer,
                                                p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_settled integer;
    v_failed integer;
    v_first_error text;
BEGIN
    SELECT count(*), count(*) FILTER (WHERE outcome = 'failed')
      INTO v_settled, v_failed
      FROM lane.batch_settlements WHERE batch_id = p_batch.id;
    IF v_failed > 0 THEN
        SELECT reason INTO v_first_error FROM lane.batch_settlements
         WHERE batch_id = p_batch.id AND outcome = 'failed'
         ORDER BY settled_at, job_queue, job_id LIMIT 1;
    END IF;
    IF p_new_failed > 0 AND v_failed = p_new_failed THEN  -- the batch's first failure
        IF NOT coalesce((p_batch.options ->> 'allow_failures')::boolean, false) THEN
            UPDATE lane.batches SET cancelled_at = p_now
             WHERE id = p_batch.id AND cancelled_at IS NULL;
        END IF;
        PERFORM lane._batch_callback(p_batch, 'catch', v_first_error, p_now);
    END IF;
    IF p_batch.finished_at IS NULL AND v_settled >= p_batch.total_jobs THEN
        UPDATE lane.batches SET finished_at = p_now WHERE id = p_batch.id;
        IF v_failed = 0 AND p_batch.cancelled_at IS NULL THEN
            PERFORM lane._batch_callback(p_batch, 'then', NULL, p_now);
        END IF;
        PERFORM lane._batch_callback(p_batch, 'finally', v_first_error, p_now);
    END IF;
END $$;

-- Enqueues a batch's callback job when the batch names one for p_kind.
CREATE OR REPLACE FUNCTION lane._batch_callback(p_batch lane.batches, p_kind text,
                                                p_error text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_batch.options ->> p_kind IS NULL THEN
        RETURN;
    END IF;
    PERFORM lane.add_job(
        p_batch.options ->> 'callback_queue', 'lane_pg:batch_callback',
        jsonb_build_object('batch_id', p_batch.id, 'kind', p_kind,
                           'callback', p_batch.options ->> p_kind, 'error', p_error),
        -- Without callback_options, retried as a chain's catch job is (found by the soak,
        -- for callers other than the facade).
        coalesce(p_batch.options -> 'callback_options', lane._callback_retry())
            || jsonb_build_object('job_id', format('batch-%s-%s', p_batch.id, p_kind)),
        p_now);
END $$;

-- BATCH-6: one batch with its derived counts; no row when it does not exist.
-- (lane.v_batches in sql/views.sql repeats this query for the reader role: keep them alike.)
CREATE OR REPLACE FUNCTION lane.find_batch(p_id uuid)
RETURNS TABLE (id uuid, name text, total_jobs integer, pending_jobs integer,
               failed_jobs integer, failed_job_ids text[], options jsonb,
               created_at timestamptz, cancelled_at timestamptz, finished_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT b.id, b.name, b.total_jobs,
           greatest(0, b.total_jobs - coalesce(s.settled, 0))::integer,
           coalesce(s.failed, 0)::integer, coalesce(s.failed_ids, '{}'),
           b.options, b.created_at, b.cancelled_at, b.finished_at
      FROM lane.batches b
      LEFT JOIN LATERAL (
          SELECT count(*) AS settled, count(*) FILTER (WHERE x.outcome = 'failed') AS failed,
                 array_agg(x.job_id ORDER BY x.settled_at, x.job_queue, x.job_id)
                     FILTER (WHERE x.outcome = 'failed') AS failed_ids
            FROM lane.batch_settlements x WHERE x.batch_id = b.id) s ON true
     WHERE b.id = p_id
$$;

-- The newest batches first (created_at, then id), with their counts; p_state: NULL (all),
-- 'pending' (not finished), 'finished' or 'cancelled'. p_before_created/p_before_id page.
CREATE OR REPLACE FUNCTION lane.list_batches(p_limit integer DEFAULT 50,
                                             p_state text DEFAULT NULL)
RETURNS TABLE (id uuid, name text, total_jobs integer, pending_jobs integer,
               failed_jobs integer, failed_job_ids text[], options jsonb,
               created_at timestamptz, cancelled_at timestamptz, finished_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        PERFORM lane._fail('LN003', format('limit must be a positive number, got %s',
                                           coalesce(p_limit::text, 'NULL')));
    END IF;
    IF p_state IS NOT NULL AND p_state NOT IN ('pending', 'finished', 'cancelled') THEN
        PERFORM lane._fail('LN003', format(
            'state must be pending, finished or cancelled, got %L', p_state));
    END IF;
    RETURN QUERY
    SELECT f.* FROM (SELECT b.id FROM lane.batches b
                      WHERE p_state IS NULL
                         OR (p_state = 'pending' AND b.finished_at IS NULL)
                         OR (p_state = 'finished' AND b.finished_at IS NOT NULL)
                         OR (p_state = 'cancelled' AND b.cancelled_at IS NOT NULL)
                      ORDER BY b.created_at DESC, b.id DESC LIMIT p_limit) picked
      CROSS JOIN LATERAL lane.find_batch(picked.id) f
     ORDER BY f.created_at DESC, f.id DESC;
END $$;

-- Cancels a batch (its jobs then skip themselves through the SkipIfBatchCancelled
-- middleware); with p_remove_waiting its jobs that have not started (waiting, delayed)
-- are removed too, each settled as deleted, so the batch can finish. Returns whether this
-- call cancelled it (false when it was cancelled already); LN030 when it does not exist.
CREATE OR REPLACE FUNCTION lane.cancel_batch(p_id uuid, p_remove_waiting boolean DEFAULT false,
                                             p_now timestamptz DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_cancelled boolean;
    v_keys bigint[];
BEGIN
    IF p_remove_waiting IS NULL THEN
        PERFORM lane._fail('LN003', 'remove_waiting must be true or false, got NULL');
    END IF;
    PERFORM 1 FROM lane.batches WHERE id = p_id;
    IF NOT FOUND THEN
        PERFORM lane._fail('LN030', format('batch %s not found', p_id));
    END IF;
    UPDATE lane.batches SET cancelled_at = v_now WHERE id = p_id AND cancelled_at IS NULL;
    v_cancelled := FOUND;
    IF p_remove_waiting THEN
        -- Jobs first, in key order (every removal's lock order), then their batch.
        v_keys := ARRAY(SELECT key FROM lane.jobs
                         WHERE batch_id = p_id AND state IN ('waiting', 'delayed')
                         ORDER BY key FOR UPDATE SKIP LOCKED);
        PERFORM lane._remove_jobs(v_keys, v_now);
    END IF;
    RETURN v_cancelled;
END $$;

-- Deletes finished batches that finished before p_now - p_finished_age_ms, and with
-- p_unfinished_age_ms those created before p_now - that age that never finished (their
-- jobs remain and settle nothing). Settlements go with their batch. Returns the count.
CREATE OR REPLACE FUNCTION lane.prune_batches(p_finished_age_ms bigint,
                                              p_unfinished_age_ms bigint DEFAULT NULL,
                                              p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_count bigint;
    v_more bigint := 0;
BEGIN
    IF p_finished_age_ms IS NULL OR p_finished_age_ms < 0
       OR coalesce(p_unfinished_age_ms, 0) < 0 THEN
        PERFORM lane._fail('LN003', 'prune_batches takes ages of 0 ms or more');
    END IF;
    DELETE FROM lane.batches
     WHERE finished_at IS NOT NULL
       AND finished_at < v_now - p_finished_age_ms * interval '1 millisecond';
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF p_unfinished_age_ms IS NOT NULL THEN
        DELETE FROM lane.batches
         WHERE finished_at IS NULL
           AND created_at < v_now - p_unfinished_age_ms * interval '1 millisecond';
        GET DIAGNOSTICS v_more = ROW_COUNT;
    END IF;
    RETURN v_count + v_more;
END $$;
