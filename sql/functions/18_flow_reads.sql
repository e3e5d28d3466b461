-- lane_pg stored functions: a flow's dependency reads (FLOW-16..23), paged; the
-- transitions are in 17_flow.sql.
-- Applied in file-name order after the migrations, on every migrate (lane_pg/postgres/schema.py).

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
