-- lane_pg stored functions: Adding jobs (ADD).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

-- Stores jobs (already validated) in input order and gives, for each spec in input order
-- (ADD-1..11), its job's key, id, enqueue sequence and order key: a custom id that exists,
-- or that an earlier spec of the same call takes, gives that job untouched, with no write,
-- no event and no sequence advance (ADD-3). Specs without a custom id (the common case) go
-- in with one INSERT whose RETURNING rows also feed the event rows: no per-row plpgsql, no
-- join back to lane.jobs. Arrays, not rows: a caller wanting rows reads them by key
-- (lane.add_jobs). Measured on 1,000 specs (medians of 9, events off): 7.9 ms against
-- 8.2 ms for the row-returning version (the narrow RETURNING, one sort for the four
-- arrays), where a plain unnest INSERT of the same rows takes 5.8 ms; a generated id is its
-- key's text (migration 0008), so those specs take no unique (queue, id) entry.
--
-- A flow (17_flows.sql) also gives the children's parent (p_parent_queue, p_parent_id) and,
-- in p_holds, which specs have children of their own: those go in waiting-children, with
-- `added` + `waiting-children`, and no enqueue sequence until released. fresh[i] says
-- whether spec i's job is the one this call inserted. p_nodes, the specs' flow nodes, is
-- read only for a spec kept as a running owner's next job (DEDUP-18, -19: its children
-- are kept with it).
CREATE OR REPLACE FUNCTION lane._store_jobs(p_queue text, p_names text[], p_datas jsonb[],
                                            p_options jsonb[], p_now timestamptz,
                                            p_parent_queue text DEFAULT NULL,
                                            p_parent_id text DEFAULT NULL,
                                            p_holds boolean[] DEFAULT NULL,
                                            p_nodes jsonb[] DEFAULT NULL,
                                            OUT keys bigint[], OUT ids text[],
                                            OUT enqueued_seqs bigint[], OUT order_keys bigint[],
                                            OUT fresh boolean[])
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_names), 0);
    v_plain boolean;
    v_custom_ids boolean;
    v_slow boolean;
    v_keys bigint[];
    v_ids text[];
    v_seqs bigint[];
    v_fresh boolean[];
    v_taken text[];
    v_custom text;
    v_dedup jsonb;
    v_owner_key bigint;
    v_pos integer;
    v_owners bigint[];
    v_pending_ids text[] := '{}';
    v_pending_keys bigint[] := '{}';
    -- Events of specs that met a job an earlier spec of this call adds: written after that
    -- job's own `added` (which the INSERT below writes).
    v_later_events text[] := '{}';
    v_later_ids text[] := '{}';
    v_later_datas jsonb[] := '{}';
    v_added text[] := '{}';  -- the custom ids this call adds
    v_series text;
    v_series_ids text[] := '{}';  -- the repeat series this call adds an occurrence of
    v_series_keys bigint[] := '{}';
    v_taken_series record;
    v_dues timestamptz[];  -- a repeat occurrence's tick, in place of its options' delay_ms
    v_i integer;
    v_record boolean;
    v_delay bigint;
    v_min_delay bigint;
    v_one_name boolean;
    v_events text := '';
    v_direct_events boolean;
BEGIN
    IF v_n = 0 THEN
        keys := '{}';
        ids := '{}';
        enqueued_seqs := '{}';
        order_keys := '{}';
        fresh := '{}';
        RETURN;
    END IF;
    v_record := coalesce((SELECT record_events FROM lane.queues WHERE name = p_queue), true);
    v_one_name := v_record AND p_names[1] = ALL (p_names);
    -- Custom ids, deduplication ids and repeat series decide spec by spec, in input order,
    -- whether a spec is new (the slow path below); a batch with none of them (the common
    -- case) is all new. A batch of default options (W2) is told by one array comparison,
    -- and skips the option scans and the two column expressions of the slow path: with
    -- them, a 1,000-spec add_jobs_brief took 7.77 ms against 7.55 before deduplication
    -- and repeat existed; without, 7.53 / 7.74 against 7.51 / 7.70 (medians of 35,
    -- interleaved, two rounds).
    v_plain := '{}'::jsonb = ALL (p_options);
    v_custom_ids := NOT v_plain
                    AND EXISTS (SELECT 1 FROM unnest(p_options) o WHERE o ->> 'job_id' IS NOT NULL);
    v_slow := v_custom_ids
              OR NOT v_plain AND EXISTS (SELECT 1 FROM unnest(p_options) o
                                          WHERE jsonb_typeof(o -> 'deduplication') = 'object'
                                             OR jsonb_typeof(o -> 'repeat') = 'object');
    IF NOT v_slow THEN
        -- Every spec is new: ids and enqueue sequences (for jobs due now) in input order.
        -- A generated id is its key's text (migration 0008).
        v_keys := ARRAY(SELECT nextval('lane.jobs_key_seq') FROM generate_series(1, v_n));
        v_ids := v_keys::text[];
        v_seqs := ARRAY(SELECT CASE WHEN coalesce((u.opt ->> 'delay_ms')::bigint, 0) = 0
                                    THEN nextval('lane.enqueue_seq') END
                          FROM unnest(p_options) WITH ORDINALITY AS u(opt, ord)
                         ORDER BY u.ord);
        v_fresh := array_fill(true, ARRAY[v_n]);
        -- A NULL sequence marks a delayed spec; a batch without any (the common case)
        -- pays this one array search, not a second pass over the options.
        IF array_position(v_seqs, NULL) IS NOT NULL THEN
            v_min_delay := (SELECT min((o ->> 'delay_ms')::bigint) FROM unnest(p_options) o
                             WHERE (o ->> 'delay_ms')::bigint > 0);
        END IF;
    ELSE
        -- A custom id already stored, or repeated earlier in the call, is not new; nor is
        -- a spec whose deduplication id another job owns (v_owners: that job's key).
        v_ids := array_fill(NULL::text, ARRAY[v_n]);
        v_keys := array_fill(NULL::bigint, ARRAY[v_n]);
        v_seqs := array_fill(NULL::bigint, ARRAY[v_n]);
        v_fresh := array_fill(false, ARRAY[v_n]);
        v_owners := array_fill(NULL::bigint, ARRAY[v_n]);
        v_dues := array_fill(NULL::timestamptz, ARRAY[v_n]);
        -- A custom id is never its key's text: jobs_custom_id_idx holds every one.
        v_taken := ARRAY(SELECT j.id FROM lane.jobs j
                          WHERE j.queue = p_queue AND j.id <> j.key::text
                            AND j.id = ANY (ARRAY(SELECT o ->> 'job_id' FROM unnest(p_options) o
                                                   WHERE o ->> 'job_id' IS NOT NULL)));
        FOR v_i IN 1 .. v_n LOOP
            v_custom := p_options[v_i] ->> 'job_id';
            v_ids[v_i] := v_custom;
            IF v_custom = ANY (v_taken) THEN
                -- ADD-3, EVS-4: the stored job, untouched; only `duplicated` says so.
                IF v_custom = ANY (v_added) THEN
                    v_later_events := v_later_events || 'duplicated'::text;
                    v_later_ids := v_later_ids || v_custom;
                    v_later_datas := v_later_datas || '{}'::jsonb;
                ELSE
                    PERFORM lane._emit(p_queue, 'duplicated', v_custom, '{}', p_now);
                END IF;
                CONTINUE;
            END IF;
            v_keys[v_i] := nextval('lane.jobs_key_seq');
            v_ids[v_i] := coalesce(v_custom, v_keys[v_i]::text);
            v_dedup := p_options[v_i] -> 'deduplication';
            IF jsonb_typeof(v_dedup) = 'object' THEN
                v_pos := array_position(v_pending_ids, v_dedup ->> 'id');
                IF v_pos IS NOT NULL THEN
                    -- DEDUP-20: an earlier spec of this call owns the id, and is not stored
                    -- yet: deduplicated against it, whatever this spec's flags say.
                    v_owner_key := v_pending_keys[v_pos];
                    v_later_events := v_later_events || ARRAY['debounced', 'deduplicated'];
                    v_later_ids := v_later_ids
                                   || array_fill(v_ids[array_position(v_keys, v_owner_key)],
                                                 ARRAY[2]);
                    v_later_datas := v_later_datas
                                     || array_fill(lane._dedup_event_data(v_dedup ->> 'id',
                                                                          v_ids[v_i]),
                                                   ARRAY[2]);
                ELSE
                    v_owner_key := lane._dedup_take(
                        p_queue, v_dedup, v_keys[v_i], v_ids[v_i], p_names[v_i], p_datas[v_i],
                        p_options[v_i], p_now, p_parent_queue, p_parent_id,
                        CASE WHEN v_dedup -> 'keep_last_if_active' = 'true'::jsonb
                             THEN p_nodes[v_i] -> 'children' END);
                END IF;
                IF v_owner_key IS NOT NULL THEN
                    v_owners[v_i] := v_owner_key;
                    CONTINUE;
                END IF;
                v_pending_ids := v_pending_ids || (v_dedup ->> 'id');
                v_pending_keys := v_pending_keys || v_keys[v_i];
            END IF;
            IF jsonb_typeof(p_options[v_i] -> 'repeat') = 'object' THEN
                v_series := lane._repeat_key(p_names[v_i], p_options[v_i] -> 'repeat');
                v_pos := array_position(v_series_ids, v_series);
                IF v_pos IS NOT NULL THEN
                    -- REP-6 within the call: an earlier spec starts this series.
                    v_owners[v_i] := v_series_keys[v_pos];
                    v_later_events := v_later_events || 'duplicated'::text;
                    v_later_ids := v_later_ids || v_ids[array_position(v_keys, v_owners[v_i])];
                    v_later_datas := v_later_datas || '{}'::jsonb;
                    CONTINUE;
                END IF;
                v_taken_series := lane._repeat_take(p_queue, v_keys[v_i], v_ids[v_i],
                                                    p_names[v_i], p_datas[v_i], p_options[v_i],
                                                    p_now);
                IF v_taken_series.owner_key IS NOT NULL THEN
                    v_owners[v_i] := v_taken_series.owner_key;
                    CONTINUE;
                END IF;
                v_dues[v_i] := v_taken_series.due_at;
                v_series_ids := v_series_ids || v_series;
                v_series_keys := v_series_keys || v_keys[v_i];
            END IF;
            v_fresh[v_i] := true;
            IF v_custom IS NOT NULL THEN
                v_taken := v_taken || v_custom;
                v_added := v_added || v_custom;
            END IF;
            v_delay := CASE WHEN v_dues[v_i] IS NULL
                            THEN coalesce((p_options[v_i] ->> 'delay_ms')::bigint, 0)
                            WHEN v_dues[v_i] <= p_now THEN 0
                            ELSE greatest(lane._epoch_ms(v_dues[v_i]) - lane._epoch_ms(p_now), 1)
                       END;
            IF v_fresh[v_i] AND v_delay = 0 THEN
                v_seqs[v_i] := nextval('lane.enqueue_seq');
            ELSIF v_fresh[v_i] THEN
                v_min_delay := least(v_min_delay, v_delay);
            END IF;
        END LOOP;
    END IF;
    IF p_holds IS NOT NULL AND true = ANY (p_holds) THEN
        -- A parent waits for its children: no sequence, and its delay counts at release.
        v_seqs := ARRAY(SELECT CASE WHEN h.hold THEN NULL ELSE h.seq END
                          FROM unnest(v_seqs, p_holds) WITH ORDINALITY AS h(seq, hold, ord)
                         ORDER BY h.ord);
        v_min_delay := (SELECT min(coalesce((h.opt ->> 'delay_ms')::bigint, 0))
                          FROM unnest(p_options, p_holds, v_fresh) AS h(opt, hold, fresh)
                         WHERE h.fresh AND NOT h.hold
                           AND coalesce((h.opt ->> 'delay_ms')::bigint, 0) > 0);
    END IF;
    -- The batch's earliest delayed job may be due before every sleeping worker's timer:
    -- one probe per call, before the rows exist (lane._wake_for_due). A batch that also
    -- adds a job due now wakes the claimers below anyway. Measured (1,000 specs per call,
    -- medians of 15): all delayed 28.6 -> 29.0 ms (the min() over the options is ~0.19 ms
    -- of it); none delayed 14.5 -> 14.5 ms (array_position finds no NULL in ~0.2 us).
    IF v_min_delay IS NOT NULL THEN
        IF NOT EXISTS (SELECT 1 FROM unnest(v_seqs) s WHERE s IS NOT NULL) THEN
            PERFORM lane._wake_for_due(p_queue, p_now + v_min_delay * interval '1 millisecond',
                                       p_now);
        END IF;
    END IF;

    -- The event rows, for a queue that records them: a queue that does not plans none
    -- (the three grouped SELECTs cost ~1 ms of planning per call: 1,000 specs with events
    -- off took 11.5 ms with them in the statement, 10.5 ms before migration 0007).
    -- A batch whose specs are all new and due now (W2's) knows its events before the
    -- INSERT: the ids, in input order. Their rows go in with one plain INSERT after it
    -- instead of being grouped from the inserted rows (two sorts, a window and the
    -- planning of three grouped SELECTs per call). 1,000 specs per call, this machine,
    -- interleaved medians: see the measurement beside lane.add_jobs_brief.
    v_direct_events := v_record AND NOT v_slow AND v_min_delay IS NULL
                       AND (p_holds IS NULL OR NOT true = ANY (p_holds));
    IF v_record AND v_direct_events IS NOT TRUE THEN
        v_events := format($events$, batches AS (
        -- One event row per 1,024 jobs and event (migration 0007): every 'added', then
        -- every 'waiting', then every 'delayed', each in input (= key) order.
        SELECT n.id, n.key, n.state, n.name, n.available_at,
               (n.key - min(n.key) OVER ()) / 1024 AS chunk
          FROM inserted n
    ), events AS (
        INSERT INTO lane.events (queue, event, data, datas, job_ids, created_at)
        SELECT $1, b.event, b.data, b.datas, b.job_ids, $8
          FROM (SELECT 1 AS k, 'added' AS event, b.chunk,
                       %s,
                       array_agg(b.id ORDER BY b.key) AS job_ids
                  FROM batches b GROUP BY b.chunk
                UNION ALL
                SELECT 2, 'waiting', b.chunk, '{}'::jsonb, NULL::jsonb[],
                       array_agg(b.id ORDER BY b.key)
                  FROM batches b WHERE b.state = 'waiting' GROUP BY b.chunk
                UNION ALL
                SELECT 3, 'delayed', b.chunk, '{}'::jsonb,
                       array_agg(jsonb_build_object('delay', lane._epoch_ms(b.available_at))
                                 ORDER BY b.key),
                       array_agg(b.id ORDER BY b.key)
                  FROM batches b WHERE b.state = 'delayed' GROUP BY b.chunk%s) b
         ORDER BY b.k, b.chunk
    )$events$,
            -- One name for the whole call (the common case): one 'added' data, no array.
            CASE WHEN v_one_name
                 THEN 'jsonb_build_object(''name'', min(b.name)) AS data, NULL::jsonb[] AS datas'
                 ELSE '''{}''::jsonb AS data,'
                      ' array_agg(jsonb_build_object(''name'', b.name) ORDER BY b.key) AS datas'
            END,
            -- A flow's parents (p_holds): their `waiting-children`, after the others.
            CASE WHEN p_holds IS NOT NULL AND true = ANY (p_holds)
                 THEN ' UNION ALL SELECT 4, ''waiting-children'', b.chunk, ''{}''::jsonb,'
                      ' NULL::jsonb[], array_agg(b.id ORDER BY b.key) FROM batches b'
                      ' WHERE b.state = ''waiting-children'' GROUP BY b.chunk'
                 ELSE '' END);
    END IF;

    -- The new rows feed the events INSERT through RETURNING: no join back to lane.jobs,
    -- whose plan would depend on statistics that lag a fast-growing table. Without custom
    -- ids they are also the result, in key (= input) order.
    -- ON CONFLICT only when a custom id is given: a concurrent add of the same custom id
    -- that commits first then wins, untouched. Generated ids are decimal and custom ids
    -- never are (ADD-4), so without custom ids there is no conflict to catch, and the
    -- speculative insertion cost 4.5 ms of ~23 per 1,000 rows (W2). One statement text
    -- for both, so EXECUTE plans it per call (~0.1 ms).
    EXECUTE format($insert$
    WITH inserted AS (
        INSERT INTO lane.jobs (key, queue, id, name, data, state, priority, lifo, order_key,
                               enqueued_seq, created_at, available_at, max_attempts,
                               backoff, timeout_ms, options, dedup_id, repeat_key,
                               parent_queue, parent_id)
        OVERRIDING SYSTEM VALUE
        SELECT u.key, $1, u.id, u.name, coalesce(u.data, 'null'::jsonb),
               CASE WHEN u.hold THEN 'waiting-children'
                    WHEN u.seq IS NULL THEN 'delayed' ELSE 'waiting' END,
               %4$s,
               u.opt,
               %1$s,
               $12, $13
          FROM unnest($2, $3, $4, $5, $6, $7, $9, $10, $11)
               WITH ORDINALITY AS u(id, name, data, opt, seq, fresh, key, due, hold, ord)
         WHERE u.fresh
         %5$s
        %2$s
        RETURNING key, id, name, state, available_at, enqueued_seq, order_key
    )%3$s
    -- One sort feeds the four arrays (an ORDER BY per aggregate sorted four times).
    SELECT array_agg(n.key), array_agg(n.id), array_agg(n.enqueued_seq), array_agg(n.order_key)
      FROM (SELECT * FROM inserted ORDER BY key) n
    $insert$, CASE WHEN v_slow
                   THEN 'u.opt -> ''deduplication'' ->> ''id'', CASE WHEN jsonb_typeof('
                        'u.opt -> ''repeat'') = ''object'' THEN lane._repeat_key(u.name, '
                        'u.opt -> ''repeat'') END'
                   ELSE 'NULL::text, NULL::text' END,
           CASE WHEN v_custom_ids THEN 'ON CONFLICT (queue, id) WHERE id <> key::text DO NOTHING'
                ELSE '' END,
           v_events,
           -- Default options (W2): the columns they give, read from no document, and no
           -- sort of the specs into input order (their keys already are, and the result is
           -- sorted by key). Measured beside lane.add_jobs_brief.
           CASE WHEN v_plain
                THEN '0, false, lane._order_key(0, false, coalesce(u.seq, 0)), u.seq, $8, $8, 1,'
                     ' NULL::jsonb, NULL::bigint'
                ELSE $columns$coalesce((u.opt ->> 'priority')::integer, 0),
               coalesce((u.opt ->> 'lifo')::boolean, false),
               lane._order_key(coalesce((u.opt ->> 'priority')::integer, 0),
                               coalesce((u.opt ->> 'lifo')::boolean, false),
                               coalesce(u.seq, 0)),
               u.seq, $8,
               CASE WHEN u.due > $8 THEN u.due
                    ELSE $8 + coalesce((u.opt ->> 'delay_ms')::bigint, 0)
                              * interval '1 millisecond' END,
               coalesce((u.opt ->> 'attempts')::integer, 1),
               nullif(u.opt -> 'backoff', 'null'::jsonb),
               (u.opt ->> 'timeout_ms')::bigint$columns$ END,
           CASE WHEN v_plain THEN '' ELSE 'ORDER BY u.ord' END)
    INTO keys, ids, enqueued_seqs, order_keys
    USING p_queue, v_ids, p_names, p_datas, p_options, v_seqs, v_fresh, p_now, v_keys,
          v_dues, p_holds, p_parent_queue, p_parent_id;
    IF v_direct_events THEN
        -- The rows the grouped SELECTs write for such a batch: every 'added', then every
        -- 'waiting', one row per 1,024 jobs (migration 0007), in input (= key) order.
        INSERT INTO lane.events (queue, event, data, datas, job_ids, created_at)
        SELECT p_queue, e.event,
               CASE WHEN e.k = 1 AND v_one_name THEN jsonb_build_object('name', p_names[1])
                    ELSE '{}'::jsonb END,
               CASE WHEN e.k = 1 AND NOT v_one_name
                    THEN ARRAY(SELECT jsonb_build_object('name', n.name)
                                 FROM unnest(p_names[c.lo:c.hi]) WITH ORDINALITY AS n(name, ord)
                                ORDER BY n.ord) END,
               v_ids[c.lo:c.hi], p_now
          FROM (SELECT g, g * 1024 + 1 AS lo, least(g * 1024 + 1024, v_n) AS hi
                  FROM generate_series(0, (v_n - 1) / 1024) AS g) c,
               (VALUES (1, 'added'), (2, 'waiting')) AS e(k, event)
         ORDER BY e.k, c.g;
    END IF;
    FOR v_i IN 1 .. cardinality(v_later_events) LOOP
        PERFORM lane._emit(p_queue, v_later_events[v_i], v_later_ids[v_i], v_later_datas[v_i],
                           p_now);
    END LOOP;
    -- ADD-4/5: jobs due now wake the claimers (a spec whose custom id existed wakes them
    -- needlessly, which is harmless).
    IF EXISTS (SELECT 1 FROM unnest(v_seqs) s WHERE s IS NOT NULL) THEN
        PERFORM lane._wake(p_queue);
    END IF;
    fresh := v_fresh;
    IF v_slow THEN
        -- Every spec's job: the owner of its deduplication id, else the job stored under
        -- its id (new, already stored, or a concurrent add's that committed first).
        keys := ARRAY(SELECT coalesce(o.key, k.key)
                        FROM unnest(v_owners) WITH ORDINALITY AS o(key, ord)
                        LEFT JOIN lane._job_keys(array_fill(p_queue, ARRAY[v_n]), v_ids) k
                          ON k.ord = o.ord
                       ORDER BY o.ord);
        SELECT array_agg(j.id ORDER BY u.ord), array_agg(j.enqueued_seq ORDER BY u.ord),
               array_agg(j.order_key ORDER BY u.ord)
          INTO ids, enqueued_seqs, order_keys
          FROM unnest(keys) WITH ORDINALITY AS u(key, ord)
          JOIN lane.jobs j ON j.key = u.key
         WHERE j.key = ANY (keys);
        -- A spec that lost its custom id to a concurrent add inserted nothing.
        fresh := ARRAY(SELECT f.fresh AND f.key = f.mine
                         FROM unnest(v_fresh, keys, v_keys) WITH ORDINALITY AS f(fresh, key, mine, ord)
                        ORDER BY f.ord);
    END IF;
END $$;

-- ADD-1: one job, inserted here directly, also with a custom id or a deduplication id:
-- going through the general path (then lane._insert_jobs, arrays and a row set read back
-- into a variable) measured 357 us per autocommit call against ~280 us for a plain add,
-- and its per-spec path (a statement EXECUTEd and planned per call, the read-back) 1.3
-- ms per deduplicated add and 0.86 ms per custom-id add in the database, against 40 us
-- for a plain one. So the column mapping below, and the generated id that is the key's
-- text (0008), repeat lane._store_jobs' on purpose; tests/postgres/test_functions.py
-- checks they store the same row, with and without a custom id. A known queue skips the
-- queue-name regex (its row
-- exists only because its name passed it); default options skip the option walk. The
-- same read of the queue row gives record_events: off, no event rows (~37 us of ~272).
-- Everything here runs before the commit that makes the job visible, so it is also most
-- of what W4's enqueue-to-start latency has over the raw INSERT (benchmarks/README.md:
-- a worker's claim starts ~0.05 ms after the producer sees this call return).
-- Where a plain autocommit add's time goes (pgbench -M prepared, one client, 8 s runs,
-- three interleaved rounds, 2026-12-06): a bare INSERT of the same row 0.20-0.23 ms; in a
-- minimal plpgsql function 0.25; + the queue row read 0.27-0.30; + NOTIFY 0.30-0.32;
-- + the event rows 0.34-0.36 (one row costs as much as two: it is the second statement
-- and table, not the row; an UNLOGGED events table saved nothing); this function 0.37.
-- Folding the queue read, the job and its events into one statement saved ~0.01 ms.
-- The Python call adds ~6 us of CPU on top (PostgresJobs.add_job with the I/O stubbed).
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
    v_key bigint;
    v_owner_key bigint;
    v_custom text := v_options ->> 'job_id';
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
        INSERT INTO lane.queues (name, paused_all) VALUES (p_queue, lane._all_paused())
        ON CONFLICT DO NOTHING;
    END IF;
    IF jsonb_typeof(v_options -> 'repeat') = 'object' THEN
        -- A repeat may meet its series' owner (REP-6): the general path handles it.
        v_key := (lane._store_jobs(p_queue, ARRAY[p_name], ARRAY[p_data], ARRAY[v_options],
                                   v_now)).keys[1];
        SELECT * INTO v_job FROM lane.jobs WHERE key = v_key;
        RETURN v_job;
    END IF;
    IF v_custom IS NOT NULL THEN
        -- ADD-3: a stored custom id gives that job, untouched; only `duplicated` says so.
        -- A custom id is never its key's text: jobs_custom_id_idx holds every one.
        SELECT * INTO v_job FROM lane.jobs
         WHERE queue = p_queue AND id = v_custom AND id <> key::text;
        IF FOUND THEN
            PERFORM lane._emit(p_queue, 'duplicated', v_custom, '{}', v_now);
            RETURN v_job;
        END IF;
    END IF;
    v_key := nextval('lane.jobs_key_seq');  -- a generated id is its key's text (0008)
    IF jsonb_typeof(v_options -> 'deduplication') = 'object' THEN
        -- DEDUP-1..9 (lane._dedup_take itself ~10 us).
        v_owner_key := lane._dedup_take(p_queue, v_options -> 'deduplication', v_key,
                                        coalesce(v_custom, v_key::text), p_name, p_data,
                                        v_options, v_now);
        IF v_owner_key IS NOT NULL THEN
            SELECT * INTO v_job FROM lane.jobs WHERE key = v_owner_key;
            RETURN v_job;
        END IF;
    END IF;
    v_delay := coalesce((v_options ->> 'delay_ms')::bigint, 0);
    IF v_delay = 0 THEN
        v_seq := nextval('lane.enqueue_seq');
    ELSIF NOT EXISTS (SELECT 1 FROM lane.jobs
                       WHERE queue = p_queue AND state = 'delayed' AND available_at > v_now
                         AND available_at <= v_now + v_delay * interval '1 millisecond') THEN
        -- lane._wake_for_due, inlined (a PERFORM costs a call): a sleeping worker's timer
        -- may be later than this job. Measured in the database (3,000 calls in one
        -- transaction, medians of 9): a delayed add 44.7 -> 50.6 us for this probe; the
        -- plain path never gets here (32.6 -> 32.3 us, unchanged).
        PERFORM lane._wake(p_queue);
    END IF;
    IF v_custom IS NULL THEN
        INSERT INTO lane.jobs (key, queue, id, name, data, state, priority, lifo, order_key,
                               enqueued_seq, created_at, available_at, max_attempts,
                               backoff, timeout_ms, options, dedup_id)
        OVERRIDING SYSTEM VALUE
        VALUES (v_key, p_queue, v_key::text, p_name, coalesce(p_data, 'null'::jsonb),
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
                v_options, v_options -> 'deduplication' ->> 'id')
        RETURNING * INTO v_job;
    ELSE
        -- The same row as above with the custom id, and ON CONFLICT for a concurrent add
        -- of the same id: not on the plain INSERT, where the speculative insertion cost
        -- ~40 us per autocommit add (307 against 265 us round trip, medians of 10 x
        -- 1,500; 0.7 us inside one transaction: it is commit-time work).
        INSERT INTO lane.jobs (key, queue, id, name, data, state, priority, lifo, order_key,
                               enqueued_seq, created_at, available_at, max_attempts,
                               backoff, timeout_ms, options, dedup_id)
        OVERRIDING SYSTEM VALUE
        VALUES (v_key, p_queue, v_custom, p_name, coalesce(p_data, 'null'::jsonb),
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
                v_options, v_options -> 'deduplication' ->> 'id')
        ON CONFLICT (queue, id) WHERE id <> key::text DO NOTHING
        RETURNING * INTO v_job;
        IF NOT FOUND THEN
            -- A concurrent add of the same custom id committed first (ADD-3): its job.
            SELECT * INTO v_job FROM lane.jobs
             WHERE queue = p_queue AND id = v_custom AND id <> key::text;
            PERFORM lane._emit(p_queue, 'duplicated', v_custom, '{}', v_now);
            RETURN v_job;
        END IF;
    END IF;
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

-- ADD-11: all specs are validated before the first insert; gives the options with NULL as
-- {}, and NULL options (not an array) as {} for every spec. Only specs with a suspect name
-- or non-default options are walked one by one, in input order, so the first bad spec is
-- the one reported.
CREATE OR REPLACE FUNCTION lane._checked_specs(p_queue text, p_names text[], p_datas jsonb[],
                                               p_options jsonb[])
RETURNS jsonb[] LANGUAGE plpgsql AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_names), 0);
    v_options jsonb[];
    v_i integer;
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF coalesce(cardinality(p_datas), 0) <> v_n
       OR p_options IS NOT NULL AND cardinality(p_options) <> v_n THEN
        PERFORM lane._fail('LN000', 'add_jobs needs names, datas and options of equal length');
    END IF;
    IF p_options IS NULL THEN
        v_options := array_fill('{}'::jsonb, ARRAY[v_n]);
    ELSE
        v_options := ARRAY(SELECT coalesce(o, '{}'::jsonb) FROM unnest(p_options) o);
    END IF;
    FOR v_i IN
        SELECT u.ord FROM unnest(p_names, v_options) WITH ORDINALITY AS u(name, opt, ord)
         WHERE u.name IS NULL OR u.name = '' OR length(u.name) > 255 OR u.opt <> '{}'::jsonb
         ORDER BY u.ord
    LOOP
        PERFORM lane._check_name(p_names[v_i]);
        PERFORM lane._check_options(v_options[v_i]);
    END LOOP;
    PERFORM lane._ensure_queue(p_queue);
    RETURN v_options;
END $$;

-- ADD-11: results in input order, read back by key.
CREATE OR REPLACE FUNCTION lane.add_jobs(p_queue text, p_names text[], p_datas jsonb[],
                                         p_options jsonb[], p_now timestamptz DEFAULT NULL)
RETURNS SETOF lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_keys bigint[];
BEGIN
    v_keys := (lane._store_jobs(p_queue, p_names, p_datas,
                                lane._checked_specs(p_queue, p_names, p_datas, p_options),
                                coalesce(p_now, clock_timestamp()))).keys;
    RETURN QUERY SELECT j.* FROM unnest(v_keys) WITH ORDINALITY AS k(key, ord)
                   JOIN lane.jobs j ON j.key = k.key
                  WHERE j.key = ANY (v_keys)
                  ORDER BY k.ord;
END $$;

-- W2: lane.add_jobs for a caller that needs only what the database chose for each job,
-- in input order (its id, enqueue sequence and order key), and the one creation time.
-- PostgresBackend.add_jobs builds the snapshots of a batch without options from these
-- and from what it sent: 1,000 full rows coming back and decoded into snapshots took
-- 17 ms of a 42 ms call. Same checks, rows, events and wake-ups as lane.add_jobs.
-- The events of a batch of new jobs due now written from their ids (lane._store_jobs):
-- 1,000 plain specs per call through asyncpg, medians of 15, 2026-12-06: 10.0 -> 8.4-8.8
-- ms for this call, 12.8 -> 11.2-11.6 ms through PostgresBackend.add_jobs (a 1,000-row
-- INSERT into a one-index table from the same JSON: 2.3 ms). Then the default options'
-- columns as constants and no sort into input order: medians of 40 calls, three
-- alternations, 8.4-9.6 -> 7.9-8.4 ms.
CREATE OR REPLACE FUNCTION lane.add_jobs_brief(p_queue text, p_names text[], p_datas jsonb[],
                                               p_options jsonb[], p_now timestamptz DEFAULT NULL,
                                               OUT created_at timestamptz, OUT ids text[],
                                               OUT enqueued_seqs bigint[],
                                               OUT order_keys bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    v_stored record;
BEGIN
    created_at := coalesce(p_now, clock_timestamp());
    v_stored := lane._store_jobs(p_queue, p_names, p_datas,
                                 lane._checked_specs(p_queue, p_names, p_datas, p_options),
                                 created_at);
    ids := v_stored.ids;
    enqueued_seqs := v_stored.enqueued_seqs;
    order_keys := v_stored.order_keys;
END $$;
