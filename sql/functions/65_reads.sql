-- lane_pg stored functions: Reads: jobs, states, counts, pages (MGMT).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

CREATE OR REPLACE FUNCTION lane.get_job(p_queue text, p_id text)
RETURNS SETOF lane.jobs LANGUAGE sql STABLE AS $$
    SELECT * FROM lane.jobs WHERE key = lane._find_key(p_queue, p_id)
$$;

-- MGMT-1: what a job's snapshot shows besides its row: how many log lines it has, when its
-- deduplication id stops blocking (while it owns it; NULL: no TTL or not the owner), and
-- its flow children in attach order (queues and ids; empty for a job without any). Read
-- by get_job only: claims and settlements never pay for it.
CREATE OR REPLACE FUNCTION lane.get_job_extras(p_queue text, p_id text,
                                               OUT logs_count bigint,
                                               OUT dedup_expires_at timestamptz,
                                               OUT child_queues text[], OUT child_ids text[])
LANGUAGE sql STABLE AS $$
    SELECT (SELECT count(*) FROM lane.job_logs l WHERE l.job_key = j.key),
           (SELECT o.expires_at FROM lane.dedup_owners o
             WHERE o.queue = j.queue AND o.dedup_id = j.dedup_id AND o.job_key = j.key),
           ARRAY(SELECT d.child_queue FROM lane.flow_deps d WHERE d.parent_key = j.key
                  ORDER BY d.seq),
           ARRAY(SELECT d.child_id FROM lane.flow_deps d WHERE d.parent_key = j.key
                  ORDER BY d.seq)
      FROM lane.jobs j WHERE j.key = lane._find_key(p_queue, p_id)
$$;

CREATE OR REPLACE FUNCTION lane.get_job_state(p_queue text, p_id text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT state FROM lane.jobs WHERE key = lane._find_key(p_queue, p_id)
$$;

-- The jobs of one queue in one state, counted through that state's partial index: each
-- branch's literal state is what lets the planner use it (there is no index on (queue,
-- state) over every row: migration 0006). Only the taken branch runs. PL/pgSQL, not SQL:
-- a SQL function with subqueries is not inlined and is planned again on every call of the
-- query that calls it (a `count_jobs` round trip on an empty table: 1.5 ms, against 0.55 ms
-- with PL/pgSQL's plans kept for the session and 0.3 ms for a bare `SELECT 1`).
CREATE OR REPLACE FUNCTION lane._count_state(p_queue text, p_state text)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    CASE p_state
    WHEN 'waiting' THEN
        RETURN (SELECT count(*) FROM lane.jobs WHERE queue = p_queue AND state = 'waiting');
    WHEN 'delayed' THEN
        RETURN (SELECT count(*) FROM lane.jobs WHERE queue = p_queue AND state = 'delayed');
    WHEN 'active' THEN
        RETURN (SELECT count(*) FROM lane.jobs WHERE queue = p_queue AND state = 'active');
    WHEN 'waiting-children' THEN
        RETURN (SELECT count(*) FROM lane.jobs
                 WHERE queue = p_queue AND state = 'waiting-children');
    WHEN 'completed' THEN
        RETURN (SELECT count(*) FROM lane.jobs WHERE queue = p_queue AND state = 'completed');
    WHEN 'failed' THEN
        RETURN (SELECT count(*) FROM lane.jobs WHERE queue = p_queue AND state = 'failed');
    ELSE
        RETURN NULL;
    END CASE;
END $$;

-- MGMT-23: all six states when p_states is NULL or empty; duplicates count once, in
-- first-seen order; zero rows included.
CREATE OR REPLACE FUNCTION lane.get_job_counts(p_queue text, p_states text[] DEFAULT NULL)
RETURNS TABLE (state text, count bigint) LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_states text[] := CASE WHEN coalesce(cardinality(p_states), 0) = 0
                            THEN lane._job_states()
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

-- One queue's jobs in one state matching every filter given (NULL: no filter): the exact
-- name, and the jsonb value at p_data_path in the job's data (`data #> path = value`, so a
-- job lacking the path never matches; '{}' is the whole document; a path with a value of
-- SQL NULL compares to JSON null). p_limit + 1 rows, so the caller knows whether a match
-- follows its page (lane_pg.backend.reads.SearchJobs; no total: counting the matches would
-- read every job of the state). The bounds (500, 100000) are MAX_SEARCH_* there.
-- One branch per state, each with its literal state (lane._count_state) and in the order
-- of that state's partial index, so the scan stops after p_offset + p_limit + 1 matches:
-- waiting in claim order (jobs_waiting_idx), delayed by due time (jobs_delayed_idx),
-- waiting-children newest first (jobs_waiting_children_idx backwards), completed and failed
-- newest finished first (jobs_finished_idx backwards). `SET enable_sort = off` keeps it so:
-- the planner guesses a jsonb `=` matches 0.5 % of rows, and with a page larger than the
-- matches it expects, it fetched the state's every row and sorted them (2,000 rows read
-- for a page of 6 in tests/postgres/test_search_jobs_plans.py, against 57 in index order).
-- In index order a page never reads more rows than that plan did, and far fewer when
-- matches are common. Active jobs have no index by queue: their branch turns sorting back on (until the
-- function returns) and sorts every queue's active jobs, found through jobs_lease_idx; the
-- primary key in order would walk the whole table.
CREATE OR REPLACE FUNCTION lane.search_jobs(p_queue text, p_state text, p_name text,
                                            p_data_path text[], p_data_value jsonb,
                                            p_offset integer, p_limit integer)
RETURNS SETOF lane.jobs LANGUAGE plpgsql STABLE SET enable_sort = off AS $$
DECLARE
    v_value jsonb := coalesce(p_data_value, 'null'::jsonb);
BEGIN
    PERFORM lane._check_states(ARRAY[p_state]);
    IF p_offset IS NULL OR p_limit IS NULL OR p_offset NOT BETWEEN 0 AND 100000
       OR p_limit NOT BETWEEN 1 AND 500 THEN
        PERFORM lane._fail('LN003', format(
            'a search page takes an offset of 0 to 100000 and a limit of 1 to 500, got %s and %s',
            coalesce(p_offset::text, 'NULL'), coalesce(p_limit::text, 'NULL')));
    END IF;
    IF p_data_path IS NULL AND p_data_value IS NOT NULL THEN
        PERFORM lane._fail('LN003', 'a data value to match needs the data path to compare it at');
    END IF;
    IF array_position(p_data_path, NULL) IS NOT NULL THEN
        PERFORM lane._fail('LN003', format('a data path has no NULL key, got %s', p_data_path));
    END IF;
    CASE p_state
    WHEN 'waiting' THEN
        RETURN QUERY
        SELECT * FROM lane.jobs j
         WHERE j.queue = p_queue AND j.state = 'waiting'
           AND (p_name IS NULL OR j.name = p_name)
           AND (p_data_path IS NULL OR j.data #> p_data_path = v_value)
         ORDER BY j.order_key, j.key OFFSET p_offset LIMIT p_limit + 1;
    WHEN 'delayed' THEN
        RETURN QUERY
        SELECT * FROM lane.jobs j
         WHERE j.queue = p_queue AND j.state = 'delayed'
           AND (p_name IS NULL OR j.name = p_name)
           AND (p_data_path IS NULL OR j.data #> p_data_path = v_value)
         ORDER BY j.available_at, j.key OFFSET p_offset LIMIT p_limit + 1;
    WHEN 'active' THEN
        PERFORM set_config('enable_sort', 'on', true);  -- until the function returns
        RETURN QUERY
        SELECT * FROM lane.jobs j
         WHERE j.queue = p_queue AND j.state = 'active'
           AND (p_name IS NULL OR j.name = p_name)
           AND (p_data_path IS NULL OR j.data #> p_data_path = v_value)
         ORDER BY j.key OFFSET p_offset LIMIT p_limit + 1;
    WHEN 'waiting-children' THEN
        RETURN QUERY
        SELECT * FROM lane.jobs j
         WHERE j.queue = p_queue AND j.state = 'waiting-children'
           AND (p_name IS NULL OR j.name = p_name)
           AND (p_data_path IS NULL OR j.data #> p_data_path = v_value)
         ORDER BY j.key DESC OFFSET p_offset LIMIT p_limit + 1;
    WHEN 'completed' THEN
        RETURN QUERY
        SELECT * FROM lane.jobs j
         WHERE j.queue = p_queue AND j.state = 'completed'
           AND (p_name IS NULL OR j.name = p_name)
           AND (p_data_path IS NULL OR j.data #> p_data_path = v_value)
         ORDER BY j.finished_at DESC, j.key DESC OFFSET p_offset LIMIT p_limit + 1;
    WHEN 'failed' THEN
        RETURN QUERY
        SELECT * FROM lane.jobs j
         WHERE j.queue = p_queue AND j.state = 'failed'
           AND (p_name IS NULL OR j.name = p_name)
           AND (p_data_path IS NULL OR j.data #> p_data_path = v_value)
         ORDER BY j.finished_at DESC, j.key DESC OFFSET p_offset LIMIT p_limit + 1;
    END CASE;
END $$;

-- MGMT-24: the sum of lane.get_job_counts, with its rules: all six states when p_states
-- is NULL or empty, a repeated state counted once.
CREATE OR REPLACE FUNCTION lane.count_jobs(p_queue text, p_states text[])
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_states text[] := CASE WHEN coalesce(cardinality(p_states), 0) = 0
                            THEN lane._job_states()
                            ELSE p_states END;
BEGIN
    PERFORM lane._check_states(v_states);
    RETURN (SELECT coalesce(sum(lane._count_state(p_queue, s)), 0)::bigint
              FROM (SELECT DISTINCT s FROM unnest(v_states) s) d);
END $$;

-- MGMT-25: the jobs that are still to run: waiting, delayed and waiting-children.
CREATE OR REPLACE FUNCTION lane.count_pending_jobs(p_queue text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT lane._count_state(p_queue, 'waiting') + lane._count_state(p_queue, 'delayed')
         + lane._count_state(p_queue, 'waiting-children')
$$;

-- A16: jobs ready to run now: waiting, plus delayed ones whose time has come (the next
-- claim promotes them), the second part a range of jobs_delayed_idx.
CREATE OR REPLACE FUNCTION lane.count_ready_jobs(p_queue text, p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT lane._count_state(p_queue, 'waiting')
         + (SELECT count(*) FROM lane.jobs
             WHERE queue = p_queue AND state = 'delayed'
               AND available_at <= coalesce(p_now, clock_timestamp()))
$$;

-- INSP-1, INSP-5: delayed jobs whose time has not come (the facade's delayed_size). A due
-- one is ready (lane.count_ready_jobs: the next claim promotes it), so the two split the
-- delayed rows at one instant and never count a job twice.
CREATE OR REPLACE FUNCTION lane.count_scheduled_jobs(p_queue text, p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM lane.jobs
     WHERE queue = p_queue AND state = 'delayed'
       AND available_at > coalesce(p_now, clock_timestamp())
$$;

-- INSP-1, INSP-5: the listing that goes with those counts. p_ready: the jobs
-- lane.count_ready_jobs counts (waiting, then due delayed ones); else those of
-- lane.count_scheduled_jobs. Each part in insertion order, as lane.list_jobs.
CREATE OR REPLACE FUNCTION lane.list_jobs_by_readiness(p_queue text, p_ready boolean,
                                                       p_offset integer DEFAULT 0,
                                                       p_limit integer DEFAULT 20,
                                                       p_now timestamptz DEFAULT NULL)
RETURNS SETOF lane.jobs LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    IF p_ready IS NULL OR p_offset IS NULL OR p_limit IS NULL OR p_offset < 0 OR p_limit < 0 THEN
        PERFORM lane._fail('LN003', format(
            'readiness must be true or false and offset and limit must not be negative, '
            'got %s, %s and %s', coalesce(p_ready::text, 'NULL'),
            coalesce(p_offset::text, 'NULL'), coalesce(p_limit::text, 'NULL')));
    END IF;
    RETURN QUERY
    SELECT j.* FROM (
        SELECT * FROM lane.jobs WHERE p_ready AND queue = p_queue AND state = 'waiting'
        UNION ALL
        SELECT * FROM lane.jobs WHERE p_ready AND queue = p_queue AND state = 'delayed'
                                  AND available_at <= v_now
        UNION ALL
        SELECT * FROM lane.jobs WHERE NOT p_ready AND queue = p_queue AND state = 'delayed'
                                  AND available_at > v_now
    ) j
     ORDER BY lane._state_rank(j.state), j.key
    OFFSET p_offset LIMIT p_limit;
END $$;

-- MGMT-26, ORD-5: waiting jobs per requested priority, each a range count of
-- jobs_waiting_idx over the priority's bucket of order keys (lane._order_key: priority *
-- 2^41 up to the next priority's start, a job released to the front included); a repeated
-- priority counts once, in first-seen order. LN002 for a priority outside
-- 0..lane._max_priority().
CREATE OR REPLACE FUNCTION lane.get_counts_per_priority(p_queue text, p_priorities integer[])
RETURNS TABLE (priority integer, count bigint) LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_bad integer;
BEGIN
    SELECT p INTO v_bad FROM unnest(p_priorities) p
     WHERE p IS NULL OR p NOT BETWEEN 0 AND lane._max_priority() LIMIT 1;
    IF FOUND THEN
        PERFORM lane._fail('LN002', format(
            'priority must be an integer between 0 and %s, got %s', lane._max_priority(),
            coalesce(v_bad::text, 'NULL')));
    END IF;
    RETURN QUERY
    SELECT w.p, (SELECT count(*) FROM lane.jobs j
                  WHERE j.queue = p_queue AND j.state = 'waiting'
                    AND j.order_key >= w.p::bigint * 2199023255552
                    AND j.order_key < (w.p::bigint + 1) * 2199023255552)
      FROM (SELECT s.p, min(s.ord) AS ord
              FROM unnest(p_priorities) WITH ORDINALITY AS s(p, ord) GROUP BY s.p) w
     ORDER BY w.ord;
END $$;

-- MGMT-27, PAUSE-13: the pause flag and the six state counts of one queue, from one
-- statement's snapshot (STABLE functions read their caller's); false and zeros for a
-- queue that does not exist.
CREATE OR REPLACE FUNCTION lane.get_queue_stats(p_queue text)
RETURNS TABLE (paused boolean, waiting bigint, delayed bigint, active bigint,
               waiting_children bigint, completed bigint, failed bigint)
LANGUAGE sql STABLE AS $$
    SELECT lane.is_queue_paused(p_queue),
           lane._count_state(p_queue, 'waiting'), lane._count_state(p_queue, 'delayed'),
           lane._count_state(p_queue, 'active'), lane._count_state(p_queue, 'waiting-children'),
           lane._count_state(p_queue, 'completed'), lane._count_state(p_queue, 'failed')
$$;

-- STATE-4: one row for a job that exists: its state, its return value when completed
-- (JSON null included) and its failure reason when failed, whatever other fields hold.
CREATE OR REPLACE FUNCTION lane.get_job_finished_result(p_queue text, p_id text)
RETURNS TABLE (state text, return_value jsonb, failed_reason text) LANGUAGE sql STABLE AS $$
    SELECT j.state,
           CASE WHEN j.state = 'completed' THEN coalesce(j.return_value, 'null'::jsonb) END,
           CASE WHEN j.state = 'failed' THEN coalesce(j.failed_reason, '') END
      FROM lane.jobs j WHERE j.key = lane._find_key(p_queue, p_id)
$$;
