-- Undoes 0003_queue_events.sql (Alembic downgrade to 0002): the two queue-events
-- functions, the column, and the events keys of version 2. The functions that read
-- record_events go back to their version 2 definitions (below, as released): functions.sql
-- is only re-applied by an upgrade, and a version 2 library would otherwise call bodies
-- that read a column that no longer exists.

DROP FUNCTION IF EXISTS lane.get_queue_events(text);
DROP FUNCTION IF EXISTS lane.queue_records_events(text);
DROP FUNCTION IF EXISTS lane.set_queue_events(text, boolean);

CREATE OR REPLACE FUNCTION lane._emit(p_queue text, p_event text, p_job_id text,
                                      p_data jsonb, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lane.events (queue, event, job_id, data, created_at)
    VALUES (p_queue, p_event, p_job_id, p_data, p_now);
END $$;

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
         WHERE j.key = ANY (p_keys)
         ORDER BY u.ord;
    END IF;
END $$;

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
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
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

CREATE OR REPLACE FUNCTION lane.add_job(p_queue text, p_name text,
                                        p_data jsonb DEFAULT 'null',
                                        p_options jsonb DEFAULT '{}',
                                        p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_options jsonb := coalesce(p_options, '{}'::jsonb);
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_known boolean := EXISTS (SELECT 1 FROM lane.queues WHERE name = p_queue);
    v_delay bigint;
    v_seq bigint;
    v_job lane.jobs;
BEGIN
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
    INSERT INTO lane.events (queue, event, job_id, data, created_at)
    VALUES (p_queue, 'added', v_job.id, jsonb_build_object('name', p_name), v_now),
           (p_queue, v_job.state, v_job.id,
            CASE WHEN v_seq IS NULL
                 THEN jsonb_build_object('delay', lane._epoch_ms(v_job.available_at))
                 ELSE '{}'::jsonb END, v_now);
    IF v_seq IS NOT NULL THEN
        PERFORM lane._wake(p_queue);
    END IF;
    RETURN v_job;
END $$;

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
        SELECT paused INTO v_paused FROM lane.queues WHERE name = v_queue;
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
              FROM claimed c ORDER BY c.ord
        )
        SELECT (c.job).* FROM claimed c ORDER BY c.ord;
        -- No re-notify here (CLAIM-8): every LISTENing worker already received the
        -- wake-up that made these jobs ready, and a NOTIFY in each claim would serialise
        -- all claim commits on the notification queue lock.
        v_left := v_left - cardinality(v_keys);
    END LOOP;
END $$;

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
    INSERT INTO lane.events (queue, event, job_id, data, created_at)
    SELECT d.queue, 'completed', d.id,
           jsonb_build_object('prev', 'active', 'returnvalue', d.return_value), p_now
      FROM unnest(v_done) WITH ORDINALITY AS d
     ORDER BY ordinality;
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

ALTER TABLE lane.queues DROP COLUMN record_events;

ALTER TABLE lane.events DROP CONSTRAINT events_pkey;
ALTER TABLE lane.events ADD PRIMARY KEY (id);
CREATE INDEX events_queue_idx ON lane.events (queue, id);
