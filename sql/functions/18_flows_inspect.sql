-- lane_pg stored functions: a stuck flow, inspected and unstuck by an administrator: the
-- dependency reads (FLOW-16..23, paged) and the cuts (FLOW-24, FLOW-25); the transitions
-- are in 17_flows.sql.
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

-- FLOW-24: removes the parent's pending children that nobody holds and that are not
-- running (waiting, delayed or waiting-children), each with its `removed` event; their
-- dependency rows stay (bucket removed: they show as missing) and the parent is released
-- when nothing is pending. The kept next jobs it waits for (DEDUP-18) are dropped too,
-- each whose owner row is free (an owner finishing now stores its child, which then is
-- pending and running-free, for a later call). Returns the removed rows.
CREATE OR REPLACE FUNCTION lane.remove_unprocessed_children(p_queue text, p_id text,
                                                            p_now timestamptz DEFAULT NULL)
RETURNS SETOF lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_parent_key bigint := lane._job_key(p_queue, p_id);
    v_children lane.jobs[];
    v_kept record;
    v_owner lane.dedup_owners;
BEGIN
    v_children := ARRAY(
        SELECT j FROM lane.flow_deps d JOIN lane.jobs j ON j.key = d.child_key
         WHERE d.parent_key = v_parent_key AND d.bucket = 'unprocessed'
           AND j.state IN ('waiting', 'delayed', 'waiting-children')
         ORDER BY d.seq
           FOR UPDATE OF j SKIP LOCKED);
    PERFORM lane._remove_jobs(ARRAY(SELECT c.key FROM unnest(v_children) c), v_now);
    FOR v_kept IN
        SELECT d.child_queue, substr(d.child_id, 3) AS dedup_id FROM lane.flow_deps d
         WHERE d.parent_key = v_parent_key AND d.bucket = 'unprocessed' AND d.child_key IS NULL
         ORDER BY d.seq
    LOOP
        SELECT * INTO v_owner FROM lane.dedup_owners
         WHERE queue = v_kept.child_queue AND dedup_id = v_kept.dedup_id FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND
                   OR (v_owner.next_job -> 'parent' ->> 'key')::bigint IS DISTINCT FROM v_parent_key;
        UPDATE lane.dedup_owners SET next_job = NULL
         WHERE queue = v_owner.queue AND dedup_id = v_owner.dedup_id;
        PERFORM lane._dedup_next_dropped(v_owner.queue, v_owner.dedup_id, v_owner.next_job, v_now);
    END LOOP;
    RETURN QUERY SELECT * FROM unnest(v_children);
END $$;

-- FLOW-25: detaches one child from its parent, whatever its bucket: the dependency row
-- goes (results included), the child stays with no parent, and the parent is released
-- when nothing is pending. False when the job has no parent.
CREATE OR REPLACE FUNCTION lane.remove_child_dependency(p_queue text, p_id text,
                                                        p_now timestamptz DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_child_key bigint := lane._job_key(p_queue, p_id);
    v_child lane.jobs;
    v_parent lane.jobs;
    v_was text;
BEGIN
    -- The key first: `WHERE key = lane._job_key(...)` calls that volatile function once per
    -- row of a sequential scan (312 ms per call on the suite's table of ~10,000 jobs).
    SELECT * INTO v_child FROM lane.jobs WHERE key = v_child_key;
    IF v_child.parent_id IS NULL THEN
        RETURN false;
    END IF;
    UPDATE lane.jobs SET parent_queue = NULL, parent_id = NULL WHERE key = v_child.key;
    SELECT * INTO v_parent FROM lane.jobs
     WHERE key = lane._find_key(v_child.parent_queue, v_child.parent_id) FOR UPDATE;
    IF NOT FOUND THEN
        RETURN true;
    END IF;
    DELETE FROM lane.flow_deps
     WHERE parent_key = v_parent.key AND child_queue = p_queue AND child_id = p_id
    RETURNING bucket INTO v_was;
    IF v_was = 'failed' AND NOT EXISTS (SELECT 1 FROM lane.flow_deps d
                                         WHERE d.parent_key = v_parent.key AND d.bucket = 'failed') THEN
        UPDATE lane.jobs SET deferred_failure = NULL WHERE key = v_parent.key;  -- FIN-8
    END IF;
    IF v_was = 'unprocessed' THEN
        UPDATE lane.jobs SET deps_pending = deps_pending - 1 WHERE key = v_parent.key
        RETURNING * INTO v_parent;
        IF v_parent.state = 'waiting-children' AND v_parent.deps_pending <= 0 THEN
            PERFORM lane._flow_release(ARRAY[v_parent.key], v_now);
        END IF;
    END IF;
    RETURN true;
END $$;

-- FLOW-17: the parent's dependency counts (NULL row values for an unknown parent), in one
-- pass over its rows; missing = attached children whose rows are gone.
CREATE OR REPLACE FUNCTION lane.get_flow_dependency_counts(p_queue text, p_id text,
                                                           OUT processed bigint,
                                                           OUT unprocessed bigint,
                                                           OUT failed bigint,
                                                           OUT ignored bigint,
                                                           OUT missing bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_key bigint := lane._find_key(p_queue, p_id);
BEGIN
    IF v_key IS NULL THEN
        RETURN;
    END IF;
    SELECT count(*) FILTER (WHERE d.bucket = 'processed'),
           count(*) FILTER (WHERE d.bucket = 'unprocessed'),
           count(*) FILTER (WHERE d.bucket = 'failed'),
           count(*) FILTER (WHERE d.bucket = 'ignored'),
           count(*) FILTER (WHERE d.child_key IS NOT NULL  -- a placeholder: not gone, to come
                              AND NOT EXISTS (SELECT 1 FROM lane.jobs j WHERE j.key = d.child_key))
      INTO processed, unprocessed, failed, ignored, missing
      FROM lane.flow_deps d WHERE d.parent_key = v_key;
END $$;

-- FLOW-20: one page of a bucket (processed, unprocessed, ignored, failed), in attach
-- order from after p_cursor (0: the start); the page's last seq is the next cursor, and
-- a short page means the end. A keyset range of flow_deps_page_idx: the same cost at any
-- cursor, plus the rows of other buckets it steps over (migration 0012).
CREATE OR REPLACE FUNCTION lane.get_flow_dependency_page(p_queue text, p_id text, p_kind text,
                                                         p_cursor bigint DEFAULT 0,
                                                         p_count integer DEFAULT 20)
RETURNS TABLE (seq bigint, child_queue text, child_id text, value jsonb, reason text)
LANGUAGE plpgsql STABLE
-- The page walks flow_deps_page_idx in seq order, whatever the statistics: with a bucket
-- the statistics call rare, a session's first (custom) plans read the whole table and
-- sorted it (6.6-12 ms at 10,000 children, growing with every flow's rows; F2).
SET enable_seqscan = off SET enable_sort = off SET enable_bitmapscan = off AS $$
DECLARE
    v_key bigint := lane._find_key(p_queue, p_id);
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('processed', 'unprocessed', 'ignored', 'failed') THEN
        PERFORM lane._fail('LN003', format(
            'invalid dependency kind %L: use processed, unprocessed, ignored or failed', p_kind));
    END IF;
    IF p_count IS NULL OR p_count < 1 OR p_cursor IS NULL OR p_cursor < 0 THEN
        PERFORM lane._fail('LN003', format(
            'a dependency page needs a cursor >= 0 and a count >= 1, got %s and %s',
            p_cursor, p_count));
    END IF;
    RETURN QUERY
    SELECT d.seq, d.child_queue, d.child_id, d.value, d.reason
      FROM lane.flow_deps d
     WHERE d.parent_key = v_key AND d.bucket = p_kind AND d.seq > 0 AND d.seq > p_cursor
     ORDER BY d.seq
     LIMIT p_count;
END $$;

-- FLOW-16: every dependency of a parent with its bucket and whether its child's row is
-- still there (no rows for an unknown parent or one without children); NULL for a
-- placeholder (DEDUP-18), a kept next job that has no row yet and is not missing either.
CREATE OR REPLACE FUNCTION lane.get_flow_dependencies(p_queue text, p_id text)
RETURNS TABLE (seq bigint, child_queue text, child_id text, child_key bigint, bucket text,
               value jsonb, reason text, present boolean)
LANGUAGE sql STABLE AS $$
    SELECT d.seq, d.child_queue, d.child_id, d.child_key, d.bucket, d.value, d.reason,
           CASE WHEN d.child_key IS NOT NULL
                THEN EXISTS (SELECT 1 FROM lane.jobs j WHERE j.key = d.child_key) END
      FROM lane.flow_deps d
     WHERE d.parent_key = lane._find_key(p_queue, p_id)
     ORDER BY d.seq
$$;
