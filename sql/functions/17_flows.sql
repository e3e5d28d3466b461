-- lane_pg stored functions: Flows: parents, children and their dependencies (FLOW).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- A parent waits in `waiting-children` while jobs.deps_pending (its children still
-- unprocessed, migration 0012) is above 0. Each child has one lane.flow_deps row under
-- its parent, in one bucket: unprocessed (pending), processed (completed, with its value),
-- failed (a failure that fails the parent), ignored (a failure the parent tolerates, with
-- its reason) or removed (gone without a result). The rows stay when the child's own row
-- goes (FLOW-26, FLOW-28); they go with the parent's row.
--
-- Lock order, everywhere: a child's row, then its parent's row, then the parent's
-- flow_deps rows. Whatever starts from a parent (remove_unprocessed_children,
-- add_flow_children, a re-submitted flow) takes child rows only with SKIP LOCKED or
-- NOWAIT, so it never waits on a child whose transaction waits on the parent.

-- The edge policy a child's options ask for (at most one flag, lane._check_flow).
CREATE OR REPLACE FUNCTION lane._flow_policy(p_options jsonb)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_options -> 'fail_parent_on_failure' = 'true'::jsonb THEN 'fail-deferred'
                WHEN p_options -> 'ignore_dependency_on_failure' = 'true'::jsonb THEN 'ignore'
                WHEN p_options -> 'remove_dependency_on_failure' = 'true'::jsonb THEN 'remove'
                WHEN p_options -> 'continue_parent_on_failure' = 'true'::jsonb THEN 'continue'
                ELSE 'fail' END
$$;

-- DEDUP-18: the id under which a parent waits for the kept next job of a deduplication
-- id (lane._dedup_take): never a job's id (ids starting with `0:` are reserved for it),
-- so no child's outcome, read by key, ever resolves it.
CREATE OR REPLACE FUNCTION lane._flow_placeholder_id(p_dedup_id text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT '0:' || p_dedup_id
$$;

-- DEDUP-18: the parent (locked by the caller: it is attaching children) waits for the
-- next job kept under p_dedup_id of p_queue: a pending dependency row without a child row
-- (child_key NULL), counted in deps_pending once; a later candidate for the same parent
-- keeps the row and brings its policy.
CREATE OR REPLACE FUNCTION lane._flow_hold(p_parent_key bigint, p_queue text, p_dedup_id text,
                                           p_policy text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_inserted boolean;
BEGIN
    INSERT INTO lane.flow_deps (parent_key, child_queue, child_id, child_key, bucket, policy,
                                updated_at)
    VALUES (p_parent_key, p_queue, lane._flow_placeholder_id(p_dedup_id), NULL, 'unprocessed',
            p_policy, p_now)
    ON CONFLICT (parent_key, child_queue, child_id)
    DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at
    RETURNING xmax = 0 INTO v_inserted;
    IF v_inserted THEN
        UPDATE lane.jobs SET deps_pending = coalesce(deps_pending, 0) + 1 WHERE key = p_parent_key;
    END IF;
END $$;

-- DEDUP-18, -19: the kept next job p_next of p_dedup_id (its owner's row just deleted by
-- lane._dedup_finish) stored as the flow node it was: a child whose parent still waits for
-- it takes its placeholder's place as a real dependency, in this transaction (attached as
-- lane._flow_attach attaches any child, children of its own included); a flow root, or a
-- child whose parent is gone, is stored as a flow of its own, its delay counted from p_now
-- (DEDUP-10).
CREATE OR REPLACE FUNCTION lane._flow_materialise(p_queue text, p_dedup_id text, p_next jsonb,
                                                  p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_parent lane.jobs;
    v_children jsonb := coalesce(p_next -> 'children', '[]'::jsonb);
    v_has_children boolean := jsonb_array_length(coalesce(p_next -> 'children', '[]'::jsonb)) > 0;
    v_stored record;
    v_root lane.jobs;
BEGIN
    IF p_next ? 'parent' THEN
        SELECT * INTO v_parent FROM lane.jobs
         WHERE key = (p_next -> 'parent' ->> 'key')::bigint FOR UPDATE;
        IF FOUND THEN
            DELETE FROM lane.flow_deps
             WHERE parent_key = v_parent.key AND child_queue = p_queue
               AND child_id = lane._flow_placeholder_id(p_dedup_id) AND bucket = 'unprocessed';
            IF FOUND THEN
                -- The owner's completion (or terminal failure) must not fail because of the
                -- kept node: one whose custom id is another parent's child (LN011), or
                -- held by someone else right now (55P03), is what an add of an existing
                -- id is, a duplicate (ADD-3): `duplicated` on that id, and the parent no
                -- longer waits for it. The block's savepoint is only paid on this path.
                BEGIN
                    -- No release in between: _flow_attach counts the new child, then checks.
                    UPDATE lane.jobs SET deps_pending = deps_pending - 1 WHERE key = v_parent.key
                    RETURNING * INTO v_parent;
                    PERFORM 1 FROM lane._flow_attach(
                        v_parent,
                        jsonb_build_array(jsonb_build_object(
                            'queue', p_queue, 'name', p_next ->> 'name', 'data', p_next -> 'data',
                            'options', p_next -> 'options', 'children', v_children)),
                        '{}', p_now);
                EXCEPTION WHEN SQLSTATE 'LN011' OR lock_not_available THEN
                    PERFORM lane._emit(p_queue, 'duplicated', p_next -> 'options' ->> 'job_id',
                                       '{}', p_now);
                    UPDATE lane.jobs SET deps_pending = deps_pending - 1 WHERE key = v_parent.key
                    RETURNING * INTO v_parent;
                    IF v_parent.state = 'waiting-children' AND v_parent.deps_pending <= 0 THEN
                        PERFORM lane._flow_release(ARRAY[v_parent.key], p_now);
                    END IF;
                END;
                RETURN;
            END IF;
        END IF;
    END IF;
    v_stored := lane._store_jobs(p_queue, ARRAY[p_next ->> 'name'], ARRAY[p_next -> 'data'],
                                 ARRAY[p_next -> 'options'], p_now, NULL, NULL,
                                 ARRAY[v_has_children]);
    IF v_has_children AND v_stored.fresh[1] THEN
        SELECT * INTO v_root FROM lane.jobs WHERE key = v_stored.keys[1] FOR UPDATE;
        PERFORM 1 FROM lane._flow_attach(v_root, v_children, '{}', p_now);
    END IF;
END $$;

-- FLOW-3, FLOW-29: the given parents (locked, in waiting-children) go to waiting, or to
-- delayed while their own delay is not due, each with its event (prev=waiting-children).
CREATE OR REPLACE FUNCTION lane._flow_release(p_keys bigint[], p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_due bigint[];
    v_later lane.jobs;
    v_queue text;
BEGIN
    -- Due against the later of p_now and the parent's creation: a releasing transaction
    -- may have taken its p_now before the parent was added (an owner's completion that
    -- waited for the adder's lock, DEDUP-18), and a parent without a delay of its own is
    -- due whatever that transaction's clock says.
    v_due := ARRAY(SELECT key FROM lane.jobs
                    WHERE key = ANY (p_keys) AND state = 'waiting-children'
                      AND available_at <= greatest(p_now, created_at) ORDER BY key);
    IF cardinality(v_due) > 0 THEN
        PERFORM lane._make_waiting(v_due, 'waiting-children', p_now);
        FOR v_queue IN SELECT DISTINCT queue FROM lane.jobs WHERE key = ANY (v_due) LOOP
            PERFORM lane._wake(v_queue);
        END LOOP;
    END IF;
    FOR v_later IN
        SELECT * FROM lane.jobs
         WHERE key = ANY (p_keys) AND state = 'waiting-children'
           AND available_at > greatest(p_now, created_at)
         ORDER BY key
    LOOP
        PERFORM lane._wake_for_due(v_later.queue, v_later.available_at, p_now);
        UPDATE lane.jobs SET state = 'delayed' WHERE key = v_later.key;
        PERFORM lane._emit(v_later.queue, 'delayed', v_later.id,
                           jsonb_build_object('delay', lane._epoch_ms(v_later.available_at),
                                              'prev', 'waiting-children'), p_now);
    END LOOP;
END $$;

-- FLOW-3, FLOW-4: some children (locked by the caller, by key, with their return values)
-- completed: each pending dependency moves to processed with its value, each parent's
-- count drops, and a parent with nothing left pending is released, in this transaction.
-- The work per child is one dependency row; per parent, one row. Measured against
-- lane._flow_resolve's general path (interleaved batches of 50 completions of one
-- 10,000-child flow, one session, ratio to a plain batch): 1.33-1.42x -> 1.17-1.23x, from
-- - no parent looked up by name: the dependency rows carry parent_key (~180 us a batch);
-- - no separate parent lock when the batch has one parent: its UPDATE takes the lock,
--   still after the children and before the dependency rows (the order lane._flow_forget
--   and lane._flow_restore take them in) (~160 us);
-- - two arrays from lane._complete instead of six from unnesting the job rows (~100 us).
-- The parents' counts come from a read of the children's rows before any lock: only a
-- holder of the child (which the caller is) changes that row's bucket, and a parent
-- deleted meanwhile takes its rows with it (the UPDATE then finds neither).
CREATE OR REPLACE FUNCTION lane._flow_complete(p_child_keys bigint[], p_values jsonb[],
                                               p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_parent_keys bigint[];
    v_counts integer[];
    v_parent lane.jobs;
    v_release bigint[] := '{}';
    v_i integer;
BEGIN
    SELECT array_agg(g.parent_key ORDER BY g.parent_key), array_agg(g.n ORDER BY g.parent_key)
      INTO v_parent_keys, v_counts
      FROM (SELECT d.parent_key, count(*)::integer AS n FROM lane.flow_deps d
             WHERE d.child_key = ANY (p_child_keys) AND d.bucket = 'unprocessed'
             GROUP BY d.parent_key) g;
    IF v_parent_keys IS NULL THEN
        RETURN;
    END IF;
    IF cardinality(v_parent_keys) > 1 THEN  -- in key order, against a deadlock
        PERFORM 1 FROM lane.jobs WHERE key = ANY (v_parent_keys) ORDER BY key FOR UPDATE;
    END IF;
    FOR v_i IN 1 .. cardinality(v_parent_keys) LOOP
        UPDATE lane.jobs SET deps_pending = deps_pending - v_counts[v_i]
         WHERE key = v_parent_keys[v_i]
        RETURNING * INTO v_parent;
        IF FOUND AND v_parent.state = 'waiting-children' AND v_parent.deps_pending <= 0 THEN
            v_release := v_release || v_parent.key;
        END IF;
    END LOOP;
    UPDATE lane.flow_deps d
       SET bucket = 'processed', value = u.value, updated_at = p_now
      FROM unnest(p_child_keys, p_values) AS u(child_key, value)
     WHERE d.child_key = ANY (p_child_keys) AND d.child_key = u.child_key
       AND d.bucket = 'unprocessed';
    IF cardinality(v_release) > 0 THEN
        PERFORM lane._flow_release(v_release, p_now);
    END IF;
END $$;

-- FLOW-5..10, FLOW-26: the terminal failure ('failed') or removal while pending
-- ('removed') of some children (locked by the caller, all with a parent), told to their
-- parents: the pending dependency leaves the unprocessed bucket, the parent's count
-- drops, and the parent is released, failed or given a deferred failure by the child's
-- policy, in this transaction. Work per child is one dependency row and one parent row,
-- whatever the flow's size. Completions take lane._flow_complete.
CREATE OR REPLACE FUNCTION lane._flow_resolve(p_children lane.jobs[], p_outcome text,
                                              p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_names text[];
    v_parent_names text[] := '{}';
    v_parent_found bigint[] := '{}';
    v_parent_keys bigint[];
    v_keys bigint[] := '{}';
    v_child_keys bigint[];
    v_queues text[];
    v_ids text[];
    v_reasons text[];
    v_i integer;
    v_row record;
    v_parent lane.jobs;
    v_release bigint[] := '{}';
BEGIN
    IF p_outcome NOT IN ('failed', 'removed') THEN  -- completions: lane._flow_complete
        RAISE EXCEPTION 'lane._flow_resolve takes failed or removed, not %', p_outcome;
    END IF;
    -- The children's fields as plain arrays in one statement (a FOREACH over the rows
    -- cost ~90 us a row: each step copies the composite out of the array), each parent's
    -- key looked up once, then every dependency row in one statement by its child's key:
    -- `child_key = ANY` leaves the planner only flow_deps_child_key_idx, a probe per
    -- child whatever the flow's size or the statistics. Joined on (parent_key, child),
    -- the planner read every pending sibling through another index (1,600-2,400 rows per
    -- 50 children of a 2,000-child flow, 2-3.5x a plain completion); one UPDATE per child
    -- cost ~60 us each.
    SELECT coalesce(array_agg(c.parent_queue || E'\n' || c.parent_id ORDER BY c.ordinality), '{}'),
           coalesce(array_agg(c.key ORDER BY c.ordinality), '{}'),
           coalesce(array_agg(c.queue ORDER BY c.ordinality), '{}'),
           coalesce(array_agg(c.id ORDER BY c.ordinality), '{}'),
           coalesce(array_agg(c.failed_reason ORDER BY c.ordinality), '{}')
      INTO v_names, v_child_keys, v_queues, v_ids, v_reasons
      FROM unnest(p_children) WITH ORDINALITY AS c
     WHERE c.parent_id IS NOT NULL;
    -- Each parent once (a batch's children mostly share one), then every child's parent
    -- key by one join: a plpgsql loop over the children cost ~6 us a child.
    v_parent_names := ARRAY(SELECT DISTINCT unnest(v_names));
    FOR v_i IN 1 .. cardinality(v_parent_names) LOOP
        v_parent_found := v_parent_found
                          || lane._find_key(split_part(v_parent_names[v_i], E'\n', 1),
                                            substr(v_parent_names[v_i],
                                                   strpos(v_parent_names[v_i], E'\n') + 1));
    END LOOP;
    v_keys := ARRAY(SELECT p.key  -- NULL: the parent is gone
                      FROM unnest(v_names) WITH ORDINALITY AS c(name, ord)
                      LEFT JOIN unnest(v_parent_names, v_parent_found) AS p(name, key)
                        ON p.name = c.name
                     ORDER BY c.ord);
    v_parent_keys := ARRAY(SELECT DISTINCT k FROM unnest(v_keys) k WHERE k IS NOT NULL ORDER BY 1);
    IF cardinality(v_parent_keys) = 0 THEN
        RETURN;
    END IF;
    -- Parents after their children (the callers hold those), in key order.
    PERFORM 1 FROM lane.jobs WHERE key = ANY (v_parent_keys) ORDER BY key FOR UPDATE;
    FOR v_row IN
        WITH resolved AS (
            UPDATE lane.flow_deps d
               SET bucket = CASE p_outcome
                                WHEN 'removed' THEN 'removed'
                                ELSE CASE d.policy WHEN 'ignore' THEN 'ignored'
                                                   WHEN 'continue' THEN 'ignored'
                                                   WHEN 'remove' THEN 'removed'
                                                   ELSE 'failed' END END,
                   reason = CASE WHEN p_outcome = 'failed' THEN u.reason END,
                   updated_at = p_now
              FROM unnest(v_keys, v_child_keys, v_queues, v_ids, v_reasons)
                   AS u(parent_key, child_key, queue, id, reason)
             WHERE d.child_key = ANY (v_child_keys) AND d.child_key = u.child_key
               AND d.parent_key = u.parent_key AND d.child_queue = u.queue
               AND d.child_id = u.id AND d.bucket = 'unprocessed'
            RETURNING d.parent_key, d.policy, u.queue, u.id, u.reason
        )
        SELECT r.parent_key, count(*)::integer AS n,
               bool_or(r.policy = 'fail') AS fail_now,
               bool_or(r.policy IN ('fail', 'fail-deferred')) AS fails,
               bool_or(r.policy IN ('continue', 'fail-deferred')) AS early,
               min(format('child %s of queue %s failed: %s', r.id, r.queue, r.reason))
                   FILTER (WHERE r.policy IN ('fail', 'fail-deferred')) AS why
          FROM resolved r GROUP BY r.parent_key ORDER BY r.parent_key
    LOOP
        UPDATE lane.jobs SET deps_pending = deps_pending - v_row.n
         WHERE key = v_row.parent_key
        RETURNING * INTO v_parent;
        IF p_outcome = 'failed' AND v_row.fails THEN
            IF v_row.fail_now AND v_parent.state = 'waiting-children' THEN
                -- FLOW-5: the parent fails now, with its own finalisation (its parent's
                -- policy included).
                -- FAIL-2: a typed parent is recorded, as stalled recovery does.
                PERFORM lane._fail_terminal(v_parent.key, v_row.why, p_now,
                                            lane._failed_job_connection(v_parent, NULL));
                CONTINUE;
            END IF;
            IF v_parent.state NOT IN ('completed', 'failed') AND v_parent.deferred_failure IS NULL THEN
                -- FLOW-9: failed by the worker that claims it, before its processor runs
                -- (also the default policy's, once the parent was released early).
                UPDATE lane.jobs SET deferred_failure = v_row.why WHERE key = v_parent.key;
            END IF;
        END IF;
        IF v_parent.state = 'waiting-children'
           AND (v_parent.deps_pending <= 0 OR p_outcome = 'failed' AND v_row.early) THEN
            v_release := v_release || v_parent.key;
        END IF;
    END LOOP;
    IF cardinality(v_release) > 0 THEN
        PERFORM lane._flow_release(v_release, p_now);
    END IF;
END $$;

-- FLOW-27: a retried child (locked) is its parent's pending dependency again; a parent
-- that was released and has not run yet goes back to waiting-children, and a deferred
-- failure its failures set is cleared when no failing child is left.
CREATE OR REPLACE FUNCTION lane._flow_restore(p_child lane.jobs, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_parent lane.jobs;
    v_was text;
BEGIN
    SELECT * INTO v_parent FROM lane.jobs
     WHERE key = lane._find_key(p_child.parent_queue, p_child.parent_id) FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT bucket INTO v_was FROM lane.flow_deps
     WHERE parent_key = v_parent.key AND child_queue = p_child.queue AND child_id = p_child.id
       FOR UPDATE;
    IF v_was IS NULL OR v_was = 'unprocessed' THEN
        RETURN;
    END IF;
    UPDATE lane.flow_deps
       SET bucket = 'unprocessed', value = NULL, reason = NULL, updated_at = p_now,
           child_key = p_child.key
     WHERE parent_key = v_parent.key AND child_queue = p_child.queue AND child_id = p_child.id;
    UPDATE lane.jobs
       SET deps_pending = coalesce(deps_pending, 0) + 1,
           deferred_failure = CASE
               WHEN v_was = 'failed' AND NOT EXISTS (
                        SELECT 1 FROM lane.flow_deps d
                         WHERE d.parent_key = v_parent.key AND d.bucket = 'failed')
               THEN NULL ELSE deferred_failure END
     WHERE key = v_parent.key
    RETURNING * INTO v_parent;
    IF v_parent.state IN ('waiting', 'delayed') THEN
        UPDATE lane.jobs SET state = 'waiting-children', enqueued_seq = NULL
         WHERE key = v_parent.key;
        PERFORM lane._emit(v_parent.queue, 'waiting-children', v_parent.id,
                           jsonb_build_object('prev', v_parent.state), p_now);
    END IF;
END $$;

-- The flow_deps rows of parents whose rows are deleted (a removed or pruned parent: its
-- results go with it).
CREATE OR REPLACE FUNCTION lane._flow_forget(p_parent_keys bigint[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM lane.flow_deps WHERE parent_key = ANY (p_parent_keys);
END $$;

-- FLOW-2, ADD-4, ADD-13: every node of a flow checked, breadth first, before anything is
-- written: its keys, queue, name and options (a child's failure-policy flag, at most
-- one; no repeat), children an array; then no custom id twice in one queue (the first
-- repeat in that order is reported). Returns the number of nodes. Only what a node gives
-- is checked by a call (a child inherits its parent's checked queue, default options
-- need no walk): a call per check per node made 10,000 children cost 420 ms here.
CREATE OR REPLACE FUNCTION lane._check_flow(p_node jsonb, p_parent_queue text)
RETURNS integer LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_nodes jsonb[] := ARRAY[p_node];
    v_queues text[] := ARRAY[p_parent_queue];
    v_node jsonb;
    v_queue text;
    v_name text;
    v_options jsonb;
    v_seen text[] := '{}';
    v_twice text;
    v_i integer := 1;
BEGIN
    WHILE v_i <= cardinality(v_nodes) LOOP
        v_node := v_nodes[v_i];
        IF jsonb_typeof(v_node) IS DISTINCT FROM 'object' THEN
            PERFORM lane._fail('LN003', format(
                'a flow node must be a JSON object {"queue", "name", "data", "options", '
                '"children"}, got %s', v_node));
        END IF;
        IF v_node - ARRAY['queue', 'name', 'data', 'options', 'children'] <> '{}'::jsonb THEN
            PERFORM lane._fail('LN003', format(
                'unknown flow node key in %s: a node takes queue, name, data, options and '
                'children', v_node));
        END IF;
        IF coalesce(jsonb_typeof(v_node -> 'queue'), 'null') = 'null' THEN
            v_queue := v_queues[v_i];
            IF v_queue IS NULL THEN
                PERFORM lane._fail('LN013', 'the flow''s root needs a queue');
            END IF;
            IF v_i = 1 THEN
                PERFORM lane._check_queue(v_queue);
            END IF;
        ELSIF jsonb_typeof(v_node -> 'queue') <> 'string' THEN
            PERFORM lane._fail('LN013', format('a queue name must be a string, got %s',
                                               v_node -> 'queue'));
        ELSE
            v_queue := v_node ->> 'queue';
            PERFORM lane._check_queue(v_queue);
        END IF;
        IF jsonb_typeof(v_node -> 'name') IS DISTINCT FROM 'string' THEN
            PERFORM lane._fail('LN003', format('invalid job name %s: use 1-255 characters',
                                               coalesce(v_node -> 'name', 'null')));
        END IF;
        v_name := v_node ->> 'name';
        IF v_name = '' OR length(v_name) > 255 THEN
            PERFORM lane._check_name(v_name);
        END IF;
        v_options := coalesce(nullif(v_node -> 'options', 'null'::jsonb), '{}'::jsonb);
        IF v_options <> '{}'::jsonb THEN
            IF jsonb_typeof(v_options) = 'object' AND v_i = 1 AND p_parent_queue IS NULL
               AND EXISTS (SELECT 1 FROM unnest(ARRAY['fail_parent_on_failure',
                                                      'ignore_dependency_on_failure',
                                                      'remove_dependency_on_failure',
                                                      'continue_parent_on_failure']) f
                            WHERE jsonb_typeof(v_options -> f) <> 'null') THEN
                PERFORM lane._fail('LN003',
                    'a failure-policy flag belongs on a child (it says what its parent does '
                    'when it fails); the root of a flow has no parent');
            END IF;
            PERFORM lane._check_options(v_options);
            IF v_options ->> 'job_id' IS NOT NULL THEN
                v_seen := v_seen || (v_queue || E'\n' || (v_options ->> 'job_id'));
            END IF;
            IF jsonb_typeof(v_options -> 'repeat') = 'object'
               AND (v_i > 1 OR p_parent_queue IS NOT NULL OR v_node ? 'children') THEN
                PERFORM lane._fail('LN003',
                    'repeat options cannot be part of a flow: a series schedules lone jobs');
            END IF;
        END IF;
        IF coalesce(jsonb_typeof(v_node -> 'children'), 'null') <> 'null' THEN
            IF jsonb_typeof(v_node -> 'children') <> 'array' THEN
                PERFORM lane._fail('LN003', format(
                    'children must be a JSON array of flow nodes, got %s', v_node -> 'children'));
            END IF;
            v_nodes := v_nodes || ARRAY(SELECT c FROM jsonb_array_elements(v_node -> 'children') c);
            v_queues := v_queues || array_fill(v_queue, ARRAY[jsonb_array_length(v_node -> 'children')]);
        END IF;
        v_i := v_i + 1;
    END LOOP;
    SELECT s.id INTO v_twice
      FROM (SELECT u.id, u.ord, row_number() OVER (PARTITION BY u.id ORDER BY u.ord) AS n
              FROM unnest(v_seen) WITH ORDINALITY AS u(id, ord)) s
     WHERE s.n = 2 ORDER BY s.ord LIMIT 1;
    IF FOUND THEN
        PERFORM lane._fail('LN001', format('job id %L appears twice in queue %s of one flow',
                                           substr(v_twice, strpos(v_twice, E'\n') + 1),
                                           split_part(v_twice, E'\n', 1)));
    END IF;
    RETURN cardinality(v_nodes);
END $$;

-- FLOW-1, FLOW-11..13, DEDUP-17: stores p_children (flow nodes, checked) under p_parent
-- (locked) and attaches them, children of children included; returns each stored node's
-- path (positions from the top node, 1-based) and key. Per queue, one lane._store_jobs
-- call stores the new children (with their parent and, for a child with children of its
-- own, in waiting-children). A spec whose deduplication id another job owns is skipped:
-- not attached, not returned. An existing custom-id child is attached (its parent
-- updated), unless it belongs to another retained parent (LN011, ParentConflict); it
-- counts as processed when completed, and as failing now (its policy applied) when failed.
CREATE OR REPLACE FUNCTION lane._flow_attach(p_parent lane.jobs, p_children jsonb,
                                             p_path integer[], p_now timestamptz)
RETURNS TABLE (path integer[], key bigint) LANGUAGE plpgsql AS $$
DECLARE
    v_queue text;
    v_ords integer[];
    v_nodes jsonb[];
    v_stored record;
    v_skeys bigint[];
    v_sids text[];
    v_child lane.jobs;
    v_options jsonb;
    v_attach boolean[];
    v_new boolean[];
    v_buckets text[];
    v_values jsonb[];
    v_policies text[];
    v_holds boolean[];
    v_pending integer := 0;
    v_failed lane.jobs[] := '{}';
    v_paths text[] := '{}';
    v_keys bigint[] := '{}';
    v_nested integer[] := '{}';
    v_nested_keys bigint[] := '{}';
    v_i integer;
BEGIN
    IF p_children IS NULL OR jsonb_typeof(p_children) <> 'array'
       OR jsonb_array_length(p_children) = 0 THEN
        RETURN;
    END IF;
    FOR v_queue IN
        SELECT q.queue FROM (
            SELECT coalesce(c.node ->> 'queue', p_parent.queue) AS queue, min(c.ord) AS first
              FROM jsonb_array_elements(p_children) WITH ORDINALITY AS c(node, ord)
             GROUP BY 1) q
         ORDER BY q.first
    LOOP
        SELECT array_agg(c.ord::integer ORDER BY c.ord), array_agg(c.node ORDER BY c.ord)
          INTO v_ords, v_nodes
          FROM jsonb_array_elements(p_children) WITH ORDINALITY AS c(node, ord)
         WHERE coalesce(c.node ->> 'queue', p_parent.queue) = v_queue;
        PERFORM lane._ensure_queue(v_queue);
        v_holds := ARRAY(SELECT coalesce(jsonb_typeof(n -> 'children') = 'array'
                                         AND jsonb_array_length(n -> 'children') > 0, false)
                           FROM unnest(v_nodes) WITH ORDINALITY u(n, o) ORDER BY o);
        v_policies := ARRAY(SELECT lane._flow_policy(coalesce(nullif(n -> 'options', 'null'::jsonb),
                                                              '{}'::jsonb))
                              FROM unnest(v_nodes) WITH ORDINALITY u(n, o) ORDER BY o);
        v_stored := lane._store_jobs(
            v_queue,
            ARRAY(SELECT n ->> 'name' FROM unnest(v_nodes) WITH ORDINALITY u(n, o) ORDER BY o),
            ARRAY(SELECT coalesce(n -> 'data', 'null'::jsonb)
                    FROM unnest(v_nodes) WITH ORDINALITY u(n, o) ORDER BY o),
            ARRAY(SELECT coalesce(nullif(n -> 'options', 'null'::jsonb), '{}'::jsonb)
                    FROM unnest(v_nodes) WITH ORDINALITY u(n, o) ORDER BY o),
            p_now, p_parent.queue, p_parent.id, v_holds, v_nodes);
        -- A child this call inserted is attached as it is: its row names the parent, and
        -- no one else sees it yet. Only the others are looked at one by one. (Local
        -- arrays: an element of a record's array field copies the whole array, which
        -- made a 10,000-child flow quadratic.)
        v_skeys := v_stored.keys;
        v_sids := v_stored.ids;
        v_attach := v_stored.fresh;
        v_new := v_stored.fresh;
        v_buckets := array_fill('unprocessed'::text, ARRAY[cardinality(v_nodes)]);
        v_values := array_fill(NULL::jsonb, ARRAY[cardinality(v_nodes)]);
        FOR v_i IN 1 .. cardinality(v_nodes) LOOP
            CONTINUE WHEN v_new[v_i];
            v_options := coalesce(nullif(v_nodes[v_i] -> 'options', 'null'::jsonb), '{}'::jsonb);
            -- DEDUP-17, -18: the owner of its deduplication id (kept as its next job, the
            -- parent holding a placeholder for it, when it runs and keep-last applies),
            -- not locked: its completion may be waiting for the owner row this call holds.
            CONTINUE WHEN v_sids[v_i] IS DISTINCT FROM v_options ->> 'job_id';
            -- Taken only if free (lock order: a child before its parent, which this call
            -- holds; a busy child is an error the caller may retry).
            SELECT * INTO v_child FROM lane.jobs WHERE lane.jobs.key = v_skeys[v_i]
               FOR UPDATE NOWAIT;
            v_attach[v_i] := true;
            IF (v_child.parent_queue, v_child.parent_id) IS DISTINCT FROM (p_parent.queue, p_parent.id) THEN
                IF v_child.parent_id IS NOT NULL
                   AND lane._find_key(v_child.parent_queue, v_child.parent_id) IS NOT NULL THEN
                    PERFORM lane._fail('LN011', format(
                        'job %s of queue %s belongs to parent %s of queue %s: remove that '
                        'dependency (remove_child_dependency) before attaching it elsewhere',
                        v_child.id, v_child.queue, v_child.parent_id, v_child.parent_queue));
                END IF;
                UPDATE lane.jobs SET parent_queue = p_parent.queue, parent_id = p_parent.id
                 WHERE lane.jobs.key = v_child.key
                RETURNING * INTO v_child;
            END IF;
            -- A child attached before keeps its dependency row (FLOW-11), which now names
            -- this row of it.
            UPDATE lane.flow_deps d SET child_key = v_child.key
             WHERE d.parent_key = p_parent.key AND d.child_queue = v_child.queue
               AND d.child_id = v_child.id;
            v_new[v_i] := NOT FOUND;
            IF v_child.state = 'completed' THEN  -- FLOW-12
                v_buckets[v_i] := 'processed';
                v_values[v_i] := coalesce(v_child.return_value, 'null'::jsonb);
            ELSIF v_new[v_i] AND v_child.state = 'failed' THEN
                v_failed := v_failed || v_child;  -- its policy applies once it is counted
            END IF;
        END LOOP;
        -- The new dependency rows in submission order (their seq is the page order). Set
        -- operations over unnest: a subscript of an array parameter in a statement that
        -- reads every element detoasts the whole array per element (1.3 s for 10,000).
        INSERT INTO lane.flow_deps (parent_key, child_queue, child_id, child_key, bucket,
                                    policy, value, updated_at)
        SELECT p_parent.key, v_queue, u.id, u.key, u.bucket, u.policy, u.value, p_now
          FROM unnest(v_sids, v_skeys, v_buckets, v_policies, v_values, v_attach, v_new)
               WITH ORDINALITY AS u(id, key, bucket, policy, value, attach, new, ord)
         WHERE u.attach AND u.new
         ORDER BY u.ord;
        SELECT v_pending + count(*) FILTER (WHERE u.new AND u.bucket = 'unprocessed'),
               v_paths || coalesce(array_agg((p_path || u.pos)::text ORDER BY u.ord), '{}'),
               v_keys || coalesce(array_agg(u.key ORDER BY u.ord), '{}'),
               v_nested || coalesce(array_agg(u.pos ORDER BY u.ord) FILTER (WHERE u.hold), '{}'),
               v_nested_keys || coalesce(array_agg(u.key ORDER BY u.ord) FILTER (WHERE u.hold), '{}')
          INTO v_pending, v_paths, v_keys, v_nested, v_nested_keys
          FROM unnest(v_ords, v_skeys, v_buckets, v_attach, v_new, v_holds)
               WITH ORDINALITY AS u(pos, key, bucket, attach, new, hold, ord)
         WHERE u.attach;
    END LOOP;
    UPDATE lane.jobs SET deps_pending = coalesce(deps_pending, 0) + v_pending
     WHERE lane.jobs.key = p_parent.key;
    RETURN QUERY SELECT n.path::integer[], n.key
                   FROM unnest(v_paths, v_keys) WITH ORDINALITY AS n(path, key, ord)
                  ORDER BY n.ord;
    -- Children of children, once this level is counted (a grandchild's outcome may
    -- already release its parent).
    FOR v_i IN 1 .. cardinality(v_nested) LOOP
        SELECT * INTO v_child FROM lane.jobs WHERE lane.jobs.key = v_nested_keys[v_i];
        RETURN QUERY SELECT * FROM lane._flow_attach(
            v_child, p_children -> (v_nested[v_i] - 1) -> 'children', p_path || v_nested[v_i],
            p_now);
    END LOOP;
    IF cardinality(v_failed) > 0 THEN
        PERFORM lane._flow_resolve(v_failed, 'failed', p_now);
    END IF;
    SELECT * INTO v_child FROM lane.jobs WHERE lane.jobs.key = p_parent.key;
    IF v_child.state = 'waiting-children' AND v_child.deps_pending <= 0 THEN
        PERFORM lane._flow_release(ARRAY[v_child.key], p_now);  -- FLOW-12
    END IF;
END $$;

-- The stored nodes as they are once the whole call has run (paths as text: arrays of
-- different lengths do not aggregate). A caller's statement cannot join them itself: its
-- snapshot predates the call's writes.
CREATE OR REPLACE FUNCTION lane._flow_rows(p_paths text[], p_keys bigint[])
RETURNS TABLE (path integer[], job lane.jobs) LANGUAGE sql STABLE AS $$
    SELECT n.path::integer[], j
      FROM unnest(p_paths, p_keys) WITH ORDINALITY AS n(path, key, ord)
      JOIN lane.jobs j ON j.key = n.key
     ORDER BY n.ord
$$;

-- FLOW-1: a whole tree, all or nothing; returns every stored node's path ({} for the
-- root, then child positions, 1-based) and row. A root with a custom id that exists keeps
-- its data and state and still takes the new children (FLOW-11); a root whose
-- deduplication id another job owns gives that owner and adds nothing (DEDUP-19).
CREATE OR REPLACE FUNCTION lane.add_flow_nodes(p_flow jsonb, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (path integer[], job lane.jobs) LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_queue text := p_flow ->> 'queue';
    v_options jsonb;
    v_root lane.jobs;
    v_stored record;
    v_has_children boolean;
    v_paths text[] := '{}';
    v_keys bigint[] := '{}';
BEGIN
    PERFORM lane._check_flow(p_flow, NULL);
    v_options := coalesce(nullif(p_flow -> 'options', 'null'::jsonb), '{}'::jsonb);
    v_has_children := coalesce(jsonb_typeof(p_flow -> 'children') = 'array'
                               AND jsonb_array_length(p_flow -> 'children') > 0, false);
    PERFORM lane._ensure_queue(v_queue);
    v_stored := lane._store_jobs(v_queue, ARRAY[p_flow ->> 'name'],
                                 ARRAY[coalesce(p_flow -> 'data', 'null'::jsonb)],
                                 ARRAY[v_options], v_now, NULL, NULL, ARRAY[v_has_children],
                                 ARRAY[p_flow]);
    SELECT * INTO v_root FROM lane.jobs WHERE lane.jobs.key = v_stored.keys[1] FOR UPDATE;
    -- DEDUP-19: a root that is another job's duplicate gives that job's flow as it stands.
    IF v_stored.fresh[1] OR v_root.id = v_options ->> 'job_id' THEN
        SELECT coalesce(array_agg(a.path::text ORDER BY a.ord), '{}'),
               coalesce(array_agg(a.key ORDER BY a.ord), '{}')
          INTO v_paths, v_keys
          FROM lane._flow_attach(v_root, p_flow -> 'children', '{}', v_now)
               WITH ORDINALITY AS a(path, key, ord);
    END IF;
    RETURN QUERY SELECT * FROM lane._flow_rows('{}'::text || v_paths, v_root.key || v_keys);
END $$;

-- The interface for SQL callers: `SELECT lane.add_flow('{"queue": ..., "children": [...]}')`
-- gives the parent's id.
CREATE OR REPLACE FUNCTION lane.add_flow(p_flow jsonb, p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_id text;
BEGIN
    SELECT (n.job).id INTO v_id FROM lane.add_flow_nodes(p_flow, p_now) n WHERE n.path = '{}';
    RETURN v_id;
END $$;

-- FLOW-14, FLOW-15: an active parent, under its token, adds children (the same node
-- shape) and waits for them in waiting-children: its lease ends, and the run does not
-- count as an attempt (its next claim is the same attempt going on). Released at once
-- if nothing it attached is pending. Refused (LN012) while a child failure fails it.
CREATE OR REPLACE FUNCTION lane.add_flow_children(p_queue text, p_id text, p_token uuid,
                                                  p_children jsonb,
                                                  p_now timestamptz DEFAULT NULL)
RETURNS TABLE (path integer[], job lane.jobs) LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_parent lane.jobs := lane._owned_job(p_queue, p_id, p_token);
    v_paths text[] := '{}';
    v_keys bigint[] := '{}';
BEGIN
    IF jsonb_typeof(p_children) IS DISTINCT FROM 'array' THEN
        PERFORM lane._fail('LN003', format(
            'children must be a JSON array of flow nodes, got %s', p_children));
    END IF;
    PERFORM lane._check_flow(jsonb_build_object('name', v_parent.name, 'children', p_children),
                             p_queue);
    IF v_parent.deferred_failure IS NOT NULL
       OR EXISTS (SELECT 1 FROM lane.flow_deps d
                   WHERE d.parent_key = v_parent.key AND d.bucket = 'failed') THEN
        PERFORM lane._fail('LN012', format(
            'job %s of queue %s has a failed child that fails it: it cannot add children',
            p_id, p_queue));
    END IF;
    UPDATE lane.jobs
       SET state = 'waiting-children', lock_token = NULL, lease_expires_at = NULL,
           worker_id = NULL, enqueued_seq = NULL,
           attempts_started = greatest(attempts_started - 1, 0),
           deps_pending = coalesce(deps_pending, 0)
     WHERE lane.jobs.key = v_parent.key
    RETURNING * INTO v_parent;
    PERFORM lane._emit(p_queue, 'waiting-children', p_id, '{"prev": "active"}', v_now);
    PERFORM lane._wake_if_capped(p_queue);  -- CLAIM-9: its slot is free
    SELECT coalesce(array_agg(a.path::text ORDER BY a.ord), '{}'),
           coalesce(array_agg(a.key ORDER BY a.ord), '{}')
      INTO v_paths, v_keys
      FROM lane._flow_attach(v_parent, p_children, '{}', v_now) WITH ORDINALITY AS a(path, key, ord);
    SELECT * INTO v_parent FROM lane.jobs WHERE lane.jobs.key = v_parent.key;
    IF v_parent.state = 'waiting-children' AND v_parent.deps_pending <= 0 THEN
        PERFORM lane._flow_release(ARRAY[v_parent.key], v_now);
    END IF;
    RETURN QUERY SELECT * FROM lane._flow_rows(v_paths, v_keys);
END $$;
