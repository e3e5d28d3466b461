-- lane_pg stored functions: Removing many jobs: a drain, a clean, a whole queue, orphans (MGMT-17..22).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- Every removal of a job goes through lane._remove_jobs (40_jobs_manage.sql, next to
-- remove_job), so what a removal must also do (events, owners, logs; the flow parent's
-- update) is written once. A drain or a clean locks its candidates in one read of their
-- state's partial index, FOR UPDATE SKIP LOCKED (a row that a claimer or a settlement
-- holds is moving out of the state being removed, and no claimer ever waits on a drain
-- or a clean: tests/postgres/test_cleanup_sql.py races them), then removes them in chunks
-- of 1,000.
--
-- Measured with EXPLAIN ANALYZE on 100,000 jobs of one queue (20,000 per state, plus
-- 100,000 of another queue), in the generic plans plpgsql caches (plan_cache_mode =
-- force_generic_plan; the literal state next to the parameter proves the partial index):
--   waiting  -> Index Scan of jobs_waiting_idx (queue = $1), claim order, no sort;
--   delayed  -> Index Scan of jobs_delayed_idx (queue = $1), due order, no sort;
--   finished -> Index Scan of jobs_finished_idx (queue, state, finished_at < cut-off);
--   active   -> Index Scan of jobs_lease_idx (lease_expires_at < now), queue filtered.
-- Each is an index range that a limited clean leaves after its last row. A first version
-- read (and locked) chunk by chunk: every chunk then walked the entries of the rows its
-- own transaction had deleted before it (they stay in the index until vacuum), O(n^2) for
-- a drain: after 90,000 deletions a chunk's read took 59 ms instead of 6.7 ms. Ordering
-- active and waiting cleans by processed_at / created_at sorted all candidates (94 and
-- 106 ms per 1,000 of 20,000). Now, on the project's 2-core VM (noisy):
-- drain of 20,000 waiting jobs 0.6-0.75 s, ~35 us a job, of which lane._remove_jobs takes
-- ~17 ms per 1,000 (the `removed` event rows 9, the deletes 8); clean of 20,000 completed
-- 0.5-0.9 s, of 10 (a limit) 6 ms, of 10,000 expired active ~0.3 s; obliterate of 100,000
-- jobs ~1.8 s.

-- lane._remove_jobs of p_keys (locked by the caller) in chunks of 1,000, so no statement
-- carries more than a chunk's arrays; returns how many jobs went.
CREATE OR REPLACE FUNCTION lane._remove_in_chunks(p_keys bigint[], p_now timestamptz)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_chunk constant integer := 1000;
    v_keys bigint[];
    v_total bigint := 0;
BEGIN
    FOR i IN 0 .. (coalesce(cardinality(p_keys), 0) + v_chunk - 1) / v_chunk - 1 LOOP
        v_keys := p_keys[i * v_chunk + 1 : (i + 1) * v_chunk];
        PERFORM lane._remove_jobs(v_keys, p_now);
        v_total := v_total + cardinality(v_keys);
    END LOOP;
    RETURN v_total;
END $$;

-- Whether a job is the occurrence its repeat series names as owner (REP-16): drains and
-- cleans keep it, so they never end a series.
CREATE OR REPLACE FUNCTION lane._is_repeat_owner(p_queue text, p_repeat_key text, p_key bigint)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT p_repeat_key IS NOT NULL
       AND EXISTS (SELECT 1 FROM lane.repeat_schedulers s
                    WHERE s.queue = p_queue AND s.key = p_repeat_key AND s.job_key = p_key)
$$;

-- The keys of the queue's jobs in p_state that lane.drain_jobs (p_cut NULL) or
-- lane.clean_jobs may remove, in the order of the state's index, up to p_limit (NULL: all),
-- locked. A row another transaction holds is skipped: a claimer's or a settlement's, it
-- is leaving the state (so no lock order is needed: nothing waits), and the limit counts
-- the rows taken. Each branch's literal state is what lets its generic plan use that
-- state's partial index, and the index order is what lets a limited clean stop after the
-- rows it takes. Order and time per state: completed and failed by finished_at; active by
-- lease expiry, only expired leases (MGMT-19), cut on processed_at (the run's start);
-- waiting in claim order, delayed in due order, both cut on created_at. The current repeat
-- owners are never chosen (MGMT-20, REP-16).
CREATE OR REPLACE FUNCTION lane._removable_keys(p_queue text, p_state text, p_cut timestamptz,
                                                p_limit integer, p_now timestamptz)
RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN
    IF p_state IN ('completed', 'failed') THEN
        RETURN ARRAY(
            SELECT j.key FROM lane.jobs j
             WHERE j.queue = p_queue AND j.state = p_state
               AND j.state IN ('completed', 'failed')
               AND j.finished_at < p_cut
             ORDER BY j.finished_at, j.key
             LIMIT p_limit
               FOR UPDATE SKIP LOCKED);
    ELSIF p_state = 'active' THEN
        RETURN ARRAY(
            SELECT j.key FROM lane.jobs j
             WHERE j.state = 'active' AND j.lease_expires_at < p_now AND j.queue = p_queue
               AND j.processed_at < p_cut
               AND NOT lane._is_repeat_owner(j.queue, j.repeat_key, j.key)
             ORDER BY j.lease_expires_at, j.key
             LIMIT p_limit
               FOR UPDATE SKIP LOCKED);
    ELSIF p_state = 'waiting' THEN
        RETURN ARRAY(
            SELECT j.key FROM lane.jobs j
             WHERE j.queue = p_queue AND j.state = 'waiting'
               AND (p_cut IS NULL OR j.created_at < p_cut)
               AND NOT lane._is_repeat_owner(j.queue, j.repeat_key, j.key)
             ORDER BY j.order_key, j.key
             LIMIT p_limit
               FOR UPDATE SKIP LOCKED);
    ELSE
        RETURN ARRAY(
            SELECT j.key FROM lane.jobs j
             WHERE j.queue = p_queue AND j.state = 'delayed'
               AND (p_cut IS NULL OR j.created_at < p_cut)
               AND NOT lane._is_repeat_owner(j.queue, j.repeat_key, j.key)
             ORDER BY j.available_at, j.key
             LIMIT p_limit
               FOR UPDATE SKIP LOCKED);
    END IF;
END $$;

-- MGMT-17, REP-16: removes the queue's waiting jobs and, with p_delayed, its delayed ones,
-- except the current owner of each repeat series (BullMQ's drain keeps its schedulers'
-- jobs in every list it drains). Active, waiting-children and finished jobs stay. One
-- locking read of each state's index, then removal in chunks of 1,000; a job a claimer
-- holds while the drain looks is skipped (it is being claimed), and jobs added meanwhile
-- may stay. Returns how many jobs went.
CREATE OR REPLACE FUNCTION lane.drain_jobs(p_queue text, p_delayed boolean DEFAULT false,
                                           p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_state text;
    v_keys bigint[] := '{}';
    v_total bigint := 0;
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF p_delayed IS NULL THEN
        PERFORM lane._fail('LN003', 'delayed must be true or false, got NULL');
    END IF;
    -- The jobs waiting (and delayed) when the drain starts, all chosen before any goes: a
    -- flow parent that removing its children releases was waiting-children then, and
    -- stays (the memory backend's drain takes the same set).
    FOREACH v_state IN ARRAY CASE WHEN p_delayed THEN ARRAY['waiting', 'delayed']
                                  ELSE ARRAY['waiting'] END LOOP
        v_keys := v_keys || lane._removable_keys(p_queue, v_state, NULL, NULL, v_now);
    END LOOP;
    v_total := lane._remove_in_chunks(v_keys, v_now);
    RETURN v_total;
END $$;

-- MGMT-18..20: removes up to p_limit (0: all) jobs of the queue in p_state whose time is
-- older than p_now - p_grace_ms, in the state's order (see lane._removable_keys), and
-- returns them as they were. Writes `removed {prev}` for each and one queue-level
-- `cleaned {count}` (also for 0, as BullMQ's clean does). States: completed, failed,
-- active (expired leases only), waiting, delayed; waiting-children is refused, as BullMQ's
-- clean has no such set: a parent's removal is its flow's business (FLOW-*). Rows others
-- hold are skipped, as in lane.drain_jobs.
CREATE OR REPLACE FUNCTION lane.clean_jobs(p_queue text, p_state text, p_grace_ms bigint,
                                           p_limit integer DEFAULT 0,
                                           p_now timestamptz DEFAULT NULL)
RETURNS SETOF lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_cut timestamptz;
    v_found bigint[];
    v_total bigint;
BEGIN
    PERFORM lane._check_queue(p_queue);
    PERFORM lane._check_states(ARRAY[p_state]);
    IF p_state = 'waiting-children' THEN
        PERFORM lane._fail('LN003',
            'clean does not take waiting-children: a parent waiting for its children is '
            'removed with remove_job, or its flow; use completed, failed, active, waiting '
            'or delayed');
    END IF;
    IF p_grace_ms IS NULL OR p_grace_ms NOT BETWEEN 0 AND lane._max_duration_ms() THEN
        PERFORM lane._fail('LN003', format(
            'grace must be 0 to %s ms, got %s', lane._max_duration_ms(),
            coalesce(p_grace_ms::text, 'NULL')));
    END IF;
    IF p_limit IS NULL OR p_limit < 0 THEN
        PERFORM lane._fail('LN003', format(
            'limit must be a count (0 for no limit), got %s', coalesce(p_limit::text, 'NULL')));
    END IF;
    v_cut := v_now - p_grace_ms * interval '1 millisecond';
    v_found := lane._removable_keys(p_queue, p_state, v_cut, nullif(p_limit, 0), v_now);
    RETURN QUERY SELECT j.* FROM unnest(v_found) WITH ORDINALITY AS u(key, ord)
                   JOIN lane.jobs j ON j.key = u.key
                  WHERE j.key = ANY (v_found)
                  ORDER BY u.ord;
    v_total := lane._remove_in_chunks(v_found, v_now);
    PERFORM lane._emit(p_queue, 'cleaned', NULL, jsonb_build_object('count', v_total), v_now);
END $$;

-- A16 (the facade's Q.clear): empties the queues (NULL: every queue) in one transaction and
-- returns how many jobs went: every waiting, delayed and waiting-children job and every
-- active job whose lease has expired; never a validly leased one (MGMT-19), a finished
-- one, or the current occurrence of a repeat series (REP-16). Every name is checked before
-- anything goes. Per queue, in name order: its waiting-children parents (removing a child
-- first could release its parent to waiting), then lane.drain_jobs with the delayed ones,
-- then lane.clean_jobs of the expired active ones, which writes `cleaned {count}` (and
-- creates a named queue that does not exist, as a clean does).
CREATE OR REPLACE FUNCTION lane.clear_queues(p_queues text[] DEFAULT NULL,
                                             p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_queues text[] := coalesce(p_queues, ARRAY(SELECT name FROM lane.queues));
    v_queue text;
    v_parents bigint[];
    v_total bigint := 0;
BEGIN
    FOREACH v_queue IN ARRAY v_queues LOOP
        PERFORM lane._check_queue(v_queue);
    END LOOP;
    FOR v_queue IN SELECT DISTINCT q FROM unnest(v_queues) AS q ORDER BY q LOOP
        -- A parent another transaction holds is settling or being removed: left to it,
        -- as a drain leaves a job a claimer holds.
        v_parents := ARRAY(
            SELECT j.key FROM lane.jobs j
             WHERE j.queue = v_queue AND j.state = 'waiting-children'
             ORDER BY j.key
               FOR UPDATE SKIP LOCKED);
        v_total := v_total + lane._remove_in_chunks(v_parents, v_now)
                           + lane.drain_jobs(v_queue, true, v_now)
                           + (SELECT count(*) FROM lane.clean_jobs(v_queue, 'active', 0, 0, v_now));
    END LOOP;
    RETURN v_total;
END $$;

-- MGMT-21: deletes everything of the queue: its jobs (through lane._remove_jobs), their
-- logs and flow dependencies (as a parent; see below for children), its events, dedup owners, repeat
-- series, claim log, metrics, and its row (pause flag, limits, retention, settings).
-- Returns how many jobs went. With an active job (any lease) and not p_force it raises
-- LN006 and changes nothing: pause the queue first, in a transaction of its own, so that
-- it stays paused and its active jobs drain (lane_pg's obliterate_queue and the CLI do).
-- Rows of the facade's failed-job store stay (RET-7: they outlive their job rows).
-- Every job row is locked, waiting for settlements running now (no SKIP LOCKED: every row
-- must go); jobs added meanwhile may stay.
CREATE OR REPLACE FUNCTION lane.obliterate_queue(p_queue text, p_force boolean DEFAULT false,
                                                 p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_found bigint[];
    v_total bigint;
    v_gone record;
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF p_force IS NULL THEN
        PERFORM lane._fail('LN003', 'force must be true or false, got NULL');
    END IF;
    IF NOT p_force THEN
        PERFORM 1 FROM lane.jobs WHERE state = 'active' AND queue = p_queue
         ORDER BY lease_expires_at LIMIT 1;
        IF FOUND THEN
            PERFORM lane._fail('LN006', format(
                'queue %s has active jobs: it cannot be obliterated unless forced (pause it '
                'and let them finish, or force)', p_queue));
        END IF;
    END IF;
    -- One locking read, whatever their state (jobs_queue_id_key for a small queue, a scan
    -- for a queue that holds much of the table), locked in key order: the order batched
    -- settlements lock in, so the two wait for each other instead of deadlocking.
    v_found := ARRAY(SELECT j.key FROM lane.jobs j WHERE j.queue = p_queue
                      ORDER BY j.key FOR UPDATE);
    -- Flows as for any removal (lane._remove_jobs): the queue's parents take their
    -- dependency rows with them, and a pending child here releases its parent, in this
    -- queue or another; a parent elsewhere keeps its record of children that were here.
    v_total := lane._remove_in_chunks(v_found, v_now);
    DELETE FROM lane.events WHERE queue = p_queue;
    -- Rows left without a job; a parent in another queue that waited for one's kept next
    -- job is told (DEDUP-18; the queue's own parents are gone).
    FOR v_gone IN
        WITH gone AS (DELETE FROM lane.dedup_owners WHERE queue = p_queue
                      RETURNING dedup_id, next_job)
        SELECT g.dedup_id, g.next_job FROM gone g WHERE g.next_job ? 'parent' ORDER BY 1
    LOOP
        PERFORM lane._dedup_next_dropped(p_queue, v_gone.dedup_id, v_gone.next_job, v_now);
    END LOOP;
    DELETE FROM lane.repeat_schedulers WHERE queue = p_queue;
    DELETE FROM lane.claim_log WHERE queue = p_queue;
    DELETE FROM lane.metrics WHERE queue = p_queue;
    DELETE FROM lane.queues WHERE name = p_queue;
    RETURN v_total;
END $$;

-- MGMT-22: deletes side rows whose job is gone: log lines, flow dependencies whose parent
-- is gone (a gone child's row is its parent's record of it, FLOW-28), dedup owner rows
-- whose TTL is over or that have none (a TTL row stays until it runs out, DEDUP-5 and
-- A10), and repeat series rows. Walks each table in primary-key order, p_count rows a
-- statement (0: 1,000), and stops after p_limit deletions (0: none). Stalled jobs have no
-- side row (STALL-1: the lease column is authoritative). Returns how many rows went.
CREATE OR REPLACE FUNCTION lane.remove_orphaned(p_count integer DEFAULT 0,
                                                p_limit integer DEFAULT 0,
                                                p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_batch integer;
    v_left bigint;
    v_after bigint := -1;
    v_last bigint;
    v_seen integer;
    v_gone bigint;
    v_owner record;
    v_total bigint := 0;
BEGIN
    IF p_count IS NULL OR p_count < 0 OR p_limit IS NULL OR p_limit < 0 THEN
        PERFORM lane._fail('LN003', format(
            'count and limit must not be negative (0: the default batch, no limit), got %s '
            'and %s', coalesce(p_count::text, 'NULL'), coalesce(p_limit::text, 'NULL')));
    END IF;
    v_batch := CASE WHEN p_count = 0 THEN 1000 ELSE p_count END;
    v_left := CASE WHEN p_limit = 0 THEN lane._max_bigint() ELSE p_limit END;
    -- Log lines, by job key: one batch of distinct keys a statement.
    LOOP
        EXIT WHEN v_left = 0;
        SELECT max(k.job_key), count(*) INTO v_last, v_seen
          FROM (SELECT DISTINCT l.job_key FROM lane.job_logs l WHERE l.job_key > v_after
                 ORDER BY l.job_key LIMIT v_batch) k;
        EXIT WHEN v_seen = 0;
        WITH gone AS (
            DELETE FROM lane.job_logs l
             WHERE l.ctid = ANY (ARRAY(
                   SELECT o.ctid FROM lane.job_logs o
                    WHERE o.job_key > v_after AND o.job_key <= v_last
                      AND NOT EXISTS (SELECT 1 FROM lane.jobs j WHERE j.key = o.job_key)
                    ORDER BY o.job_key, o.seq
                    LIMIT v_left
                      FOR UPDATE SKIP LOCKED))
            RETURNING 1)
        SELECT count(*) INTO v_gone FROM gone;
        v_total := v_total + v_gone;
        v_left := v_left - v_gone;
        v_after := v_last;
        EXIT WHEN v_seen < v_batch;
    END LOOP;
    -- Flow dependencies, by parent key.
    v_after := -1;
    LOOP
        EXIT WHEN v_left = 0;
        SELECT max(k.parent_key), count(*) INTO v_last, v_seen
          FROM (SELECT DISTINCT d.parent_key FROM lane.flow_deps d WHERE d.parent_key > v_after
                 ORDER BY d.parent_key LIMIT v_batch) k;
        EXIT WHEN v_seen = 0;
        WITH gone AS (
            DELETE FROM lane.flow_deps d
             WHERE d.ctid = ANY (ARRAY(
                   SELECT o.ctid FROM lane.flow_deps o
                    WHERE o.parent_key > v_after AND o.parent_key <= v_last
                      AND NOT EXISTS (SELECT 1 FROM lane.jobs j WHERE j.key = o.parent_key)
                    ORDER BY o.parent_key, o.child_queue, o.child_id
                    LIMIT v_left
                      FOR UPDATE SKIP LOCKED))
            RETURNING 1)
        SELECT count(*) INTO v_gone FROM gone;
        v_total := v_total + v_gone;
        v_left := v_left - v_gone;
        v_after := v_last;
        EXIT WHEN v_seen < v_batch;
    END LOOP;
    -- Dedup owners and repeat series: small tables (one row per live id or series).
    -- A parent that waited for a gone row's kept next job is told (DEDUP-18).
    v_gone := 0;
    FOR v_owner IN
        WITH gone AS (
            DELETE FROM lane.dedup_owners o
             WHERE (o.queue, o.dedup_id) IN (
                   SELECT e.queue, e.dedup_id FROM lane.dedup_owners e
                    WHERE (e.expires_at IS NULL OR e.expires_at <= v_now)
                      AND NOT EXISTS (SELECT 1 FROM lane.jobs j WHERE j.key = e.job_key)
                    ORDER BY e.queue, e.dedup_id
                    LIMIT v_left
                      FOR UPDATE SKIP LOCKED)
            RETURNING o.queue, o.dedup_id, o.next_job)
        SELECT * FROM gone g ORDER BY g.queue, g.dedup_id
    LOOP
        v_gone := v_gone + 1;
        PERFORM lane._dedup_next_dropped(v_owner.queue, v_owner.dedup_id, v_owner.next_job,
                                         v_now);
    END LOOP;
    v_total := v_total + v_gone;
    v_left := v_left - v_gone;
    WITH gone AS (
        DELETE FROM lane.repeat_schedulers s
         WHERE (s.queue, s.key) IN (
               SELECT r.queue, r.key FROM lane.repeat_schedulers r
                WHERE NOT EXISTS (SELECT 1 FROM lane.jobs j WHERE j.key = r.job_key)
                ORDER BY r.queue, r.key
                LIMIT v_left
                  FOR UPDATE SKIP LOCKED)
        RETURNING 1)
    SELECT count(*) INTO v_gone FROM gone;
    RETURN v_total + v_gone;
END $$;
