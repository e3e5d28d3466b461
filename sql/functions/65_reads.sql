-- lane_pg stored functions: Reads: jobs, states, counts, pages (MGMT).
-- Applied in file-name order after the migrations, on every migrate (lane_pg/postgres/schema.py).

CREATE OR REPLACE FUNCTION lane.get_job(p_queue text, p_id text)
RETURNS SETOF lane.jobs LANGUAGE sql STABLE AS $$
    SELECT * FROM lane.jobs WHERE key = lane._find_key(p_queue, p_id)
$$;

CREATE OR REPLACE FUNCTION lane.get_job_state(p_queue text, p_id text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT state FROM lane.jobs WHERE key = lane._find_key(p_queue, p_id)
$$;

-- The jobs of one queue in one state, counted through that state's partial index: each
-- branch's literal state is what lets the planner use it (there is no index on (queue,
-- state) over every row: migration 0006). Only the taken branch runs.
CREATE OR REPLACE FUNCTION lane._count_state(p_queue text, p_state text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT CASE p_state
        WHEN 'waiting' THEN (SELECT count(*) FROM lane.jobs
                              WHERE queue = p_queue AND state = 'waiting')
        WHEN 'delayed' THEN (SELECT count(*) FROM lane.jobs
                              WHERE queue = p_queue AND state = 'delayed')
        WHEN 'active' THEN (SELECT count(*) FROM lane.jobs
                             WHERE queue = p_queue AND state = 'active')
        WHEN 'waiting-children' THEN (SELECT count(*) FROM lane.jobs
                                       WHERE queue = p_queue AND state = 'waiting-children')
        WHEN 'completed' THEN (SELECT count(*) FROM lane.jobs
                                WHERE queue = p_queue AND state = 'completed')
        WHEN 'failed' THEN (SELECT count(*) FROM lane.jobs
                             WHERE queue = p_queue AND state = 'failed')
    END
$$;

-- MGMT-23: all six states when p_states is NULL or empty; duplicates count once, in
-- first-seen order; zero rows included.
CREATE OR REPLACE FUNCTION lane.get_job_counts(p_queue text, p_states text[] DEFAULT NULL)
RETURNS TABLE (state text, count bigint) LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_states text[] := CASE WHEN coalesce(cardinality(p_states), 0) = 0
                            THEN ARRAY['waiting', 'delayed', 'active', 'waiting-children',
                                       'completed', 'failed']
                            ELSE p_states END;
BEGIN
    PERFORM lane._check_states(v_states);
    RETURN QUERY
    WITH wanted AS (
        SELECT s.state, min(s.ord) AS ord
          FROM unnest(v_states) WITH ORDINALITY AS s(state, ord) GROUP BY s.state
    )
    SELECT w.state, lane._count_state(p_queue, w.state) FROM wanted w ORDER BY w.ord;
END $$;

-- MGMT-2: ordered by state (ALL_STATES order) then insertion order. One branch per state,
-- each on its partial index (see lane._count_state); a state not asked for is skipped.
CREATE OR REPLACE FUNCTION lane.list_jobs(p_queue text, p_states text[],
                                          p_descending boolean DEFAULT false,
                                          p_offset integer DEFAULT 0, p_limit integer DEFAULT 20)
RETURNS SETOF lane.jobs LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM lane._check_states(p_states);
    IF p_offset < 0 OR p_limit < 0 THEN
        PERFORM lane._fail('LN003', 'offset and limit must not be negative');
    END IF;
    RETURN QUERY
    SELECT j.* FROM (
        SELECT * FROM lane.jobs WHERE 'waiting' = ANY (p_states)
                                  AND queue = p_queue AND state = 'waiting'
        UNION ALL
        SELECT * FROM lane.jobs WHERE 'delayed' = ANY (p_states)
                                  AND queue = p_queue AND state = 'delayed'
        UNION ALL
        SELECT * FROM lane.jobs WHERE 'active' = ANY (p_states)
                                  AND queue = p_queue AND state = 'active'
        UNION ALL
        SELECT * FROM lane.jobs WHERE 'waiting-children' = ANY (p_states)
                                  AND queue = p_queue AND state = 'waiting-children'
        UNION ALL
        SELECT * FROM lane.jobs WHERE 'completed' = ANY (p_states)
                                  AND queue = p_queue AND state = 'completed'
        UNION ALL
        SELECT * FROM lane.jobs WHERE 'failed' = ANY (p_states)
                                  AND queue = p_queue AND state = 'failed'
    ) j
     ORDER BY CASE WHEN p_descending THEN -lane._state_rank(j.state) ELSE lane._state_rank(j.state) END,
              CASE WHEN p_descending THEN -j.key ELSE j.key END
    OFFSET p_offset LIMIT p_limit;
END $$;

CREATE OR REPLACE FUNCTION lane.count_jobs(p_queue text, p_states text[])
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM lane._check_states(p_states);
    RETURN (SELECT coalesce(sum(lane._count_state(p_queue, s)), 0)::bigint
              FROM (SELECT DISTINCT s FROM unnest(p_states) s) d);
END $$;
