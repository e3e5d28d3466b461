-- lane_pg stored functions: Reads: jobs, states, counts, pages (MGMT).
-- Applied in file-name order after the migrations, on every migrate (lane_pg/postgres/schema.py).

CREATE OR REPLACE FUNCTION lane.get_job(p_queue text, p_id text)
RETURNS SETOF lane.jobs LANGUAGE sql STABLE AS $$
    SELECT * FROM lane.jobs WHERE queue = p_queue AND id = p_id
$$;

CREATE OR REPLACE FUNCTION lane.get_job_state(p_queue text, p_id text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT state FROM lane.jobs WHERE queue = p_queue AND id = p_id
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
    SELECT w.state, (SELECT count(*) FROM lane.jobs j WHERE j.queue = p_queue AND j.state = w.state)
      FROM wanted w ORDER BY w.ord;
END $$;

-- MGMT-2: ordered by state (ALL_STATES order) then insertion order.
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
    SELECT * FROM lane.jobs j
     WHERE j.queue = p_queue AND j.state = ANY (p_states)
     ORDER BY CASE WHEN p_descending THEN -lane._state_rank(j.state) ELSE lane._state_rank(j.state) END,
              CASE WHEN p_descending THEN -j.key ELSE j.key END
    OFFSET p_offset LIMIT p_limit;
END $$;

CREATE OR REPLACE FUNCTION lane.count_jobs(p_queue text, p_states text[])
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM lane._check_states(p_states);
    RETURN (SELECT count(*) FROM lane.jobs WHERE queue = p_queue AND state = ANY (p_states));
END $$;
