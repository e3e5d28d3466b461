-- lane_pg stored functions: Deduplication owners (DEDUP).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- One lane.dedup_owners row per (queue, dedup id) names the job that owns the id. Its
-- primary key is the only thing that makes ownership unique: an add writes its owner row
-- with INSERT ... ON CONFLICT DO NOTHING in the adder's own transaction, so a concurrent
-- adder of the same id waits on that uncommitted index entry and then sees either the
-- committed owner or, when the first adder rolled back, no row and inserts its own. There
-- is no advisory lock and no existence check before the insert (Oban #1087/#1093: an
-- advisory-lock check answered "duplicate" for an insert that then rolled back).
-- Promotion, claims and every other movement of a job never touch this table (Oban #1416:
-- uniqueness enforced on job rows made a promotion UPDATE fail forever); only add,
-- finalisation, removal, retry and the calls below do, and every release deletes the row
-- only while it still names the releasing job's key (BullMQ #3232: a removal deleted a
-- newer owner's key). A row whose job is gone, or is not the job it names, or no longer
-- blocks (finished without TTL, TTL run out) is replaced or deleted where it is met, so a
-- stray row never blocks an id for good (BullMQ #4311).

-- The job of an owner row when the row still blocks duplicates at p_now, else NULL
-- (DEDUP-3, -4, -15, -16): the job must exist, be in the row's queue and carry its dedup
-- id; a keep-last owner blocks for as long as it runs, whatever its TTL; otherwise a row
-- with a TTL blocks until it runs out (also after its job finished), and one without
-- blocks until its job finishes.
CREATE OR REPLACE FUNCTION lane._dedup_owner_job(p_owner lane.dedup_owners, p_now timestamptz)
RETURNS lane.jobs LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_job lane.jobs;
BEGIN
    SELECT * INTO v_job FROM lane.jobs WHERE key = p_owner.job_key;
    IF NOT FOUND OR v_job.queue <> p_owner.queue
       OR v_job.dedup_id IS DISTINCT FROM p_owner.dedup_id THEN
        RETURN NULL;
    ELSIF v_job.state = 'active' AND p_owner.keep_last THEN
        RETURN v_job;
    ELSIF p_owner.expires_at IS NOT NULL THEN
        RETURN CASE WHEN p_owner.expires_at > p_now THEN v_job END;
    END IF;
    RETURN CASE WHEN v_job.state NOT IN ('completed', 'failed') THEN v_job END;
END $$;

-- DEDUP-2: the data of the `debounced` and `deduplicated` events, naming the id and the job
-- that lost it (the skipped candidate, or the delayed owner replaced).
CREATE OR REPLACE FUNCTION lane._dedup_event_data(p_dedup_id text, p_loser_id text)
RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object('deduplicationId', p_dedup_id, 'deduplicatedJobId', p_loser_id)
$$;

-- DEDUP-2: the pair of events a deduplicated add writes, on the job that keeps the id.
CREATE OR REPLACE FUNCTION lane._dedup_events(p_queue text, p_owner_id text, p_dedup_id text,
                                              p_loser_id text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_data jsonb := lane._dedup_event_data(p_dedup_id, p_loser_id);
BEGIN
    PERFORM lane._emit(p_queue, 'debounced', p_owner_id, v_data, p_now);
    PERFORM lane._emit(p_queue, 'deduplicated', p_owner_id, v_data, p_now);
END $$;

-- DEDUP-7: an owner a replacing add (replace_delayed, a debounce dispatch) may remove: a
-- delayed job that is standalone, i.e. neither a flow child, nor a flow parent (its
-- dependency rows and its children would be left naming a job that is gone), nor a repeat
-- series' occurrence (the series would end with it). Any other owner is kept.
CREATE OR REPLACE FUNCTION lane._dedup_replaceable(p_job lane.jobs)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT p_job.state = 'delayed' AND p_job.parent_id IS NULL
           AND p_job.deps_pending IS NULL AND p_job.repeat_key IS NULL
$$;

-- An add's claim on its dedup id (DEDUP-1..9), for the new job (p_key, p_id) about to be
-- stored with (p_name, p_data, p_options): NULL when the new job owns the id now (the
-- caller stores it), else the key of the job that keeps it (the caller stores nothing and
-- returns that job). What a live owner does to the add:
-- * replace_delayed and the owner is a standalone delayed job (lane._dedup_replaceable):
--   the owner is removed through lane._remove_jobs (`removed prev=delayed`) and the new
--   job owns the id, keeping the owner's expiry unless extend_ttl (DEDUP-7, -8); an owner
--   in a flow or a repeat series is kept and the add deduplicated as usual;
-- * keep_last_if_active and the owner is active: the add is kept as the owner's next job
--   (only the latest), stored when the owner finishes, and the owner's expiry is dropped
--   while it runs (DEDUP-9, -16);
-- * extend_ttl: the owner's expiry restarts at p_now (DEDUP-6);
-- and in every case `debounced` + `deduplicated` (DEDUP-2).
--
-- A unique id (kind 'unique', UNIQ-1, migration 0018) is one lock in the connection,
-- held in whichever queue its job is: a live one of another queue answers the add like an
-- owner of its own (the events go to the owner's queue), and a row that no longer blocks,
-- or this push's own reservation, is deleted and the insert tried again: a row is never
-- updated into a unique one, which a concurrent unique insert could collide with.
--
-- A flow node (17_flows.sql) also gives its parent (p_parent_queue, p_parent_id) and, in
-- p_children, its own children. Kept as the next job, it keeps both (DEDUP-18, -19): the
-- next record carries them, and a child's parent counts a placeholder dependency for it
-- (lane._flow_hold) until the record is stored as a job or dropped.
CREATE OR REPLACE FUNCTION lane._dedup_take(p_queue text, p_dedup jsonb, p_key bigint,
                                            p_id text, p_name text, p_data jsonb,
                                            p_options jsonb, p_now timestamptz,
                                            p_parent_queue text DEFAULT NULL,
                                            p_parent_id text DEFAULT NULL,
                                            p_children jsonb DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_dedup_id text := p_dedup ->> 'id';
    v_expires timestamptz := p_now + (p_dedup ->> 'ttl_ms')::bigint * interval '1 millisecond';
    v_keep_last boolean := coalesce((p_dedup ->> 'keep_last_if_active')::boolean, false);
    v_extend boolean := coalesce((p_dedup ->> 'extend_ttl')::boolean, false);
    v_token text := p_dedup ->> 'token';
    v_kind text := coalesce(p_dedup ->> 'kind', 'dedup');
    v_owner lane.dedup_owners;
    v_job lane.jobs;
    v_next jsonb;
    v_parent_key bigint;
    -- The parent being attached to, which its caller releases (lane._dedup_next_dropped).
    v_attaching bigint := CASE WHEN p_parent_id IS NOT NULL
                               THEN lane._find_key(p_parent_queue, p_parent_id) END;
BEGIN
    LOOP
        INSERT INTO lane.dedup_owners (queue, dedup_id, kind, job_id, job_key, expires_at,
                                       keep_last, token, created_at)
        VALUES (p_queue, v_dedup_id, v_kind, p_id, p_key, v_expires, v_keep_last, v_token,
                p_now)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN NULL;
        END IF;
        IF v_kind = 'unique' THEN
            SELECT * INTO v_owner FROM lane.dedup_owners
             WHERE dedup_id = v_dedup_id AND kind = 'unique' FOR UPDATE;
            IF NOT FOUND THEN  -- the conflict is a queue-scoped owner of this queue
                SELECT * INTO v_owner FROM lane.dedup_owners
                 WHERE queue = p_queue AND dedup_id = v_dedup_id FOR UPDATE;
            END IF;
            CONTINUE WHEN NOT FOUND;
            IF v_owner.job_key IS NULL AND v_owner.expires_at > p_now THEN
                IF v_owner.token IS DISTINCT FROM v_token THEN
                    PERFORM lane._fail('LN009', format(
                        'deduplication id %L is reserved by a pending push until %s',
                        v_dedup_id, v_owner.expires_at));
                END IF;
                v_expires := v_owner.expires_at;  -- the reserved job keeps its expiry (TX-10)
            ELSE
                v_job := lane._dedup_owner_job(v_owner, p_now);
                IF v_job.key IS NOT NULL THEN
                    IF v_extend THEN
                        UPDATE lane.dedup_owners SET expires_at = v_expires
                         WHERE queue = v_owner.queue AND dedup_id = v_dedup_id;
                    END IF;
                    PERFORM lane._dedup_events(v_job.queue, v_job.id, v_dedup_id, p_id, p_now);
                    RETURN v_job.key;
                END IF;
            END IF;
            DELETE FROM lane.dedup_owners WHERE queue = v_owner.queue AND dedup_id = v_dedup_id;
            PERFORM lane._dedup_next_dropped(v_owner.queue, v_dedup_id, v_owner.next_job, p_now,
                                             v_attaching);
            CONTINUE;
        END IF;
        SELECT * INTO v_owner FROM lane.dedup_owners
         WHERE queue = p_queue AND dedup_id = v_dedup_id FOR UPDATE;
        -- Released between the two statements (its job finished or was removed): again.
        CONTINUE WHEN NOT FOUND;
        IF v_owner.job_key IS NULL AND v_owner.expires_at > p_now THEN
            -- A live reservation (lane.reserve_deduplication_key, TX-10): the add carrying
            -- its token is the reserved job and takes the row over, keeping its expiry;
            -- any other add is refused (it has no owner job to return).
            IF v_owner.token IS NOT DISTINCT FROM v_token THEN
                UPDATE lane.dedup_owners SET job_id = p_id, job_key = p_key, kind = 'dedup'
                 WHERE queue = p_queue AND dedup_id = v_dedup_id;
                RETURN NULL;
            END IF;
            PERFORM lane._fail('LN009', format(
                'deduplication id %L of queue %s is reserved by a pending push until %s',
                v_dedup_id, p_queue, v_owner.expires_at));
        END IF;
        v_job := lane._dedup_owner_job(v_owner, p_now);
        IF v_job.key IS NULL THEN
            -- A stale or expired row: the new job takes it over (DEDUP-15, A10).
            PERFORM lane._dedup_next_dropped(p_queue, v_dedup_id, v_owner.next_job, p_now,
                                             v_attaching);
            UPDATE lane.dedup_owners
               SET job_id = p_id, job_key = p_key, expires_at = v_expires,
                   keep_last = v_keep_last, next_job = NULL, created_at = p_now,
                   token = v_token, kind = 'dedup'
             WHERE queue = p_queue AND dedup_id = v_dedup_id;
            RETURN NULL;
        END IF;
        IF coalesce((p_dedup ->> 'replace_delayed')::boolean, false)
           AND lane._dedup_replaceable(v_job) THEN
            -- Locked, then checked again: promotion may have moved it meanwhile.
            SELECT * INTO v_job FROM lane.jobs WHERE key = v_job.key FOR UPDATE;
            IF lane._dedup_replaceable(v_job) THEN
                -- The row names the new job first, so the removal (which releases only a
                -- row naming the removed job) leaves it to the new owner.
                UPDATE lane.dedup_owners
                   SET job_id = p_id, job_key = p_key, keep_last = v_keep_last, next_job = NULL,
                       expires_at = CASE WHEN v_extend THEN v_expires ELSE expires_at END,
                       token = v_token, kind = 'dedup'
                 WHERE queue = p_queue AND dedup_id = v_dedup_id;
                PERFORM lane._remove_jobs(ARRAY[v_job.key], p_now);
                PERFORM lane._dedup_next_dropped(p_queue, v_dedup_id, v_owner.next_job, p_now,
                                                 v_attaching);
                PERFORM lane._dedup_events(p_queue, p_id, v_dedup_id, v_job.id, p_now);
                RETURN NULL;
            END IF;
        END IF;
        IF v_keep_last AND v_job.state = 'active' THEN
            v_next := jsonb_build_object('name', p_name, 'data', p_data, 'options', p_options);
            IF p_parent_id IS NOT NULL THEN
                -- DEDUP-18: the parent waits for it; its placeholder first, so a parent
                -- whose earlier kept child this one replaces never reaches 0 between.
                v_parent_key := v_attaching;
                v_next := v_next || jsonb_build_object('parent', jsonb_build_object(
                              'queue', p_parent_queue, 'id', p_parent_id, 'key', v_parent_key));
                PERFORM lane._flow_hold(v_parent_key, p_queue, v_dedup_id,
                                        lane._flow_policy(p_options), p_now);
            END IF;
            IF jsonb_typeof(p_children) = 'array' AND jsonb_array_length(p_children) > 0 THEN
                v_next := v_next || jsonb_build_object('children', p_children);  -- DEDUP-19
            END IF;
            IF (v_owner.next_job -> 'parent' ->> 'key')::bigint IS DISTINCT FROM v_parent_key THEN
                -- Only the latest is kept: the replaced one's parent stops waiting for it.
                PERFORM lane._dedup_next_dropped(p_queue, v_dedup_id, v_owner.next_job, p_now,
                                                 v_parent_key);
            END IF;
            UPDATE lane.dedup_owners
               SET next_job = v_next, keep_last = true, expires_at = NULL
             WHERE queue = p_queue AND dedup_id = v_dedup_id;
        ELSIF v_extend THEN
            UPDATE lane.dedup_owners SET expires_at = v_expires
             WHERE queue = p_queue AND dedup_id = v_dedup_id;
        END IF;
        PERFORM lane._dedup_events(p_queue, v_job.id, v_dedup_id, p_id, p_now);
        RETURN v_job.key;
    END LOOP;
END $$;

-- Finalisation of owners (DEDUP-3, -4, -9, -10): for each of the given jobs, just finished
-- (completed, or failed for good) and locked by the caller, that still owns its dedup id:
-- a kept next job is stored now (its delay counted from p_now) and owns the id; otherwise
-- the row goes unless a TTL still runs (a keep-last owner's does not: it had none while
-- it ran). Called before retention may delete the jobs, so a TTL owner outlives its row
-- (DEDUP-5).
CREATE OR REPLACE FUNCTION lane._dedup_finish(p_keys bigint[], p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_owner lane.dedup_owners;
BEGIN
    FOR v_owner IN
        SELECT o.* FROM lane.jobs j
          JOIN lane.dedup_owners o
            ON o.queue = j.queue AND o.dedup_id = j.dedup_id AND o.job_key = j.key
         WHERE j.key = ANY (p_keys) AND j.dedup_id IS NOT NULL
         ORDER BY o.queue, o.dedup_id
           FOR UPDATE OF o
    LOOP
        IF v_owner.next_job IS NOT NULL
           OR v_owner.keep_last OR v_owner.expires_at IS NULL OR v_owner.expires_at <= p_now THEN
            DELETE FROM lane.dedup_owners
             WHERE queue = v_owner.queue AND dedup_id = v_owner.dedup_id;
        END IF;
        IF v_owner.next_job ? 'parent' OR v_owner.next_job ? 'children' THEN
            -- A flow node: under its parent, or as a flow of its own (DEDUP-18, -19).
            PERFORM lane._flow_materialise(v_owner.queue, v_owner.dedup_id, v_owner.next_job,
                                           p_now);
        ELSIF v_owner.next_job IS NOT NULL THEN
            -- Through the add path: it takes the id again (the row is gone), keeps a custom
            -- id (BullMQ #4030), and writes the job's added / waiting | delayed events.
            PERFORM lane._store_jobs(v_owner.queue, ARRAY[v_owner.next_job ->> 'name'],
                                     ARRAY[v_owner.next_job -> 'data'],
                                     ARRAY[v_owner.next_job -> 'options'], p_now);
        END IF;
    END LOOP;
END $$;

-- DEDUP-12, MGMT-16: a job about to be deleted gives up its dedup id, with any kept next
-- job, but only while the row still names it.
CREATE OR REPLACE FUNCTION lane._dedup_release(p_job lane.jobs, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_next jsonb;
BEGIN
    IF p_job.dedup_id IS NOT NULL THEN
        DELETE FROM lane.dedup_owners
         WHERE queue = p_job.queue AND dedup_id = p_job.dedup_id AND job_key = p_job.key
        RETURNING next_job INTO v_next;
        PERFORM lane._dedup_next_dropped(p_job.queue, p_job.dedup_id, v_next, p_now);
    END IF;
END $$;

-- DEDUP-18: a kept next job that will never be stored (its record replaced or deleted)
-- no longer holds the parent it was to join: the placeholder goes, and the parent is
-- released when nothing else is pending, except p_attaching (NULL: none), the parent a
-- caller is attaching children to, which checks its count itself once they are counted.
-- Every path that drops a next record calls this (lane._dedup_take, _dedup_release,
-- _dedup_reclaim, add_debounced_job, get_deduplication_job_id, remove_deduplication_key,
-- expire_dedup_owners, _remove_jobs, obliterate, remove_orphaned); a record without a
-- parent costs one key test.
CREATE OR REPLACE FUNCTION lane._dedup_next_dropped(p_queue text, p_dedup_id text,
                                                    p_next jsonb, p_now timestamptz,
                                                    p_attaching bigint DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_parent lane.jobs;
BEGIN
    IF p_next IS NULL OR NOT p_next ? 'parent' THEN
        RETURN;
    END IF;
    SELECT * INTO v_parent FROM lane.jobs
     WHERE key = (p_next -> 'parent' ->> 'key')::bigint FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;  -- the parent is gone, with its placeholder
    END IF;
    DELETE FROM lane.flow_deps
     WHERE parent_key = v_parent.key AND child_queue = p_queue
       AND child_id = lane._flow_placeholder_id(p_dedup_id) AND bucket = 'unprocessed';
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE lane.jobs SET deps_pending = deps_pending - 1 WHERE key = v_parent.key
    RETURNING * INTO v_parent;
    IF v_parent.state = 'waiting-children' AND v_parent.deps_pending <= 0
       AND v_parent.key IS DISTINCT FROM p_attaching THEN
        PERFORM lane._flow_release(ARRAY[v_parent.key], p_now);
    END IF;
END $$;

-- DEDUP-13: a retried job takes its dedup id back, with its TTL counted again from p_now;
-- LN009 when another job still holds it (a retained TTL owner included).
CREATE OR REPLACE FUNCTION lane._dedup_reclaim(p_job lane.jobs, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_dedup jsonb := p_job.options -> 'deduplication';
    v_expires timestamptz;
    v_owner lane.dedup_owners;
    v_holder lane.jobs;
BEGIN
    IF p_job.dedup_id IS NULL THEN
        RETURN;
    END IF;
    v_expires := p_now + (v_dedup ->> 'ttl_ms')::bigint * interval '1 millisecond';
    LOOP
        INSERT INTO lane.dedup_owners (queue, dedup_id, job_id, job_key, expires_at,
                                       keep_last, token, created_at)
        VALUES (p_job.queue, p_job.dedup_id, p_job.id, p_job.key, v_expires,
                coalesce((v_dedup ->> 'keep_last_if_active')::boolean, false),
                v_dedup ->> 'token', p_now)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN;
        END IF;
        SELECT * INTO v_owner FROM lane.dedup_owners
         WHERE queue = p_job.queue AND dedup_id = p_job.dedup_id FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        IF v_owner.job_key IS NULL AND v_owner.expires_at > p_now THEN
            PERFORM lane._fail('LN009', format(
                'deduplication id %L of queue %s is reserved by a pending push: job %s cannot '
                'be retried until it is released', p_job.dedup_id, p_job.queue, p_job.id));
        END IF;
        IF v_owner.job_key IS DISTINCT FROM p_job.key THEN
            v_holder := lane._dedup_owner_job(v_owner, p_now);
            IF v_holder.key IS NOT NULL THEN
                PERFORM lane._fail('LN009', format(
                    'deduplication id %L of queue %s is held by job %s: job %s cannot be '
                    'retried until it is released', p_job.dedup_id, p_job.queue, v_holder.id,
                    p_job.id));
            END IF;
        END IF;
        PERFORM lane._dedup_next_dropped(p_job.queue, p_job.dedup_id, v_owner.next_job, p_now);
        UPDATE lane.dedup_owners
           SET job_id = p_job.id, job_key = p_job.key, expires_at = v_expires, next_job = NULL,
               token = v_dedup ->> 'token', kind = 'dedup',
               keep_last = coalesce((v_dedup ->> 'keep_last_if_active')::boolean, false),
               created_at = p_now
         WHERE queue = p_job.queue AND dedup_id = p_job.dedup_id;
        RETURN;
    END LOOP;
END $$;

-- DEDUP-15: the id of the job that owns p_dedup_id now, or NULL; a row that no longer
-- blocks (its job gone, mismatched, finished without TTL, or its TTL run out) is deleted
-- here, with any kept next job.
CREATE OR REPLACE FUNCTION lane.get_deduplication_job_id(p_queue text, p_dedup_id text,
                                                         p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_owner lane.dedup_owners;
    v_job lane.jobs;
BEGIN
    SELECT * INTO v_owner FROM lane.dedup_owners
     WHERE queue = p_queue AND dedup_id = p_dedup_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF v_owner.job_key IS NULL AND v_owner.expires_at > coalesce(p_now, clock_timestamp()) THEN
        RETURN NULL;  -- a live reservation: it blocks, but names no job yet (TX-10)
    END IF;
    v_job := lane._dedup_owner_job(v_owner, coalesce(p_now, clock_timestamp()));
    IF v_job.key IS NULL THEN
        DELETE FROM lane.dedup_owners WHERE queue = p_queue AND dedup_id = p_dedup_id;
        PERFORM lane._dedup_next_dropped(p_queue, p_dedup_id, v_owner.next_job,
                                         coalesce(p_now, clock_timestamp()));
    END IF;
    RETURN v_job.id;
END $$;

-- DEDUP-14: frees p_dedup_id (and drops a kept next job, releasing a parent that waited
-- for it: DEDUP-18) whatever holds it; the owner job itself is not touched. True when
-- there was a row.
CREATE OR REPLACE FUNCTION lane.remove_deduplication_key(p_queue text, p_dedup_id text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_next jsonb;
BEGIN
    DELETE FROM lane.dedup_owners WHERE queue = p_queue AND dedup_id = p_dedup_id
    RETURNING next_job INTO v_next;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM lane._dedup_next_dropped(p_queue, p_dedup_id, v_next, clock_timestamp());
    RETURN true;
END $$;

-- Periodic upkeep: deletes up to p_limit owner rows whose TTL ran out (none of them blocks
-- anything any more, DEDUP-4), oldest expiry first, through dedup_owners_expiry_idx. A
-- keep-last owner that is running is kept: its TTL does not count while it runs. Without
-- this, every TTL add (a unique push, say) would leave its row behind for good. Returns
-- how many went.
CREATE OR REPLACE FUNCTION lane.expire_dedup_owners(p_limit integer DEFAULT 1000,
                                                    p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_count integer;
    v_gone record;
BEGIN
    v_count := 0;
    FOR v_gone IN
        WITH gone AS (
            DELETE FROM lane.dedup_owners o
             WHERE (o.queue, o.dedup_id) IN (
                    SELECT e.queue, e.dedup_id FROM lane.dedup_owners e
                     WHERE e.expires_at <= v_now
                       AND NOT (e.keep_last AND EXISTS (SELECT 1 FROM lane.jobs j
                                                         WHERE j.key = e.job_key
                                                           AND j.state = 'active'))
                     ORDER BY e.expires_at
                     LIMIT p_limit
                       FOR UPDATE SKIP LOCKED)
            RETURNING o.queue, o.dedup_id, o.next_job)
        SELECT * FROM gone ORDER BY 1, 2
    LOOP
        v_count := v_count + 1;
        PERFORM lane._dedup_next_dropped(v_gone.queue, v_gone.dedup_id, v_gone.next_job, v_now);
    END LOOP;
    RETURN v_count;
END $$;

-- TX-10: takes the unique id p_dedup_id for the push named p_token before its job exists
-- (push_unique writes the job right after, or at commit): a row with kind 'unique', that
-- token, an expiry p_ttl_ms from now and no job, in p_queue. Like every unique id it is one
-- lock in the connection (UNIQ-1): true when the caller holds it now (also when its token
-- already did); false when a live owner or reservation of any queue, or a live owner of
-- p_queue's own, blocks. The add that carries the token takes the row over
-- (lane._dedup_take); a row that no longer blocks is deleted and the insert tried again.
CREATE OR REPLACE FUNCTION lane.reserve_deduplication_key(p_queue text, p_dedup_id text,
                                                          p_token text, p_ttl_ms bigint,
                                                          p_now timestamptz DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_expires timestamptz;
    v_owner lane.dedup_owners;
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF p_dedup_id IS NULL OR length(p_dedup_id) NOT BETWEEN 1 AND 255
       OR p_token IS NULL OR length(p_token) NOT BETWEEN 1 AND 255
       OR p_ttl_ms IS NULL OR p_ttl_ms NOT BETWEEN 1 AND lane._max_duration_ms() THEN
        PERFORM lane._fail('LN003', format(
            'a reservation needs an id and a token of 1-255 characters and a ttl of '
            '1..%s ms, got %L, %L, %s', lane._max_duration_ms(), p_dedup_id, p_token,
            p_ttl_ms));
    END IF;
    v_expires := v_now + p_ttl_ms * interval '1 millisecond';
    -- Created as every queue is: under pause_all a new queue starts paused (PAUSE-4).
    PERFORM lane._ensure_queue(p_queue);
    LOOP
        INSERT INTO lane.dedup_owners (queue, dedup_id, kind, job_id, job_key, expires_at,
                                       keep_last, token, created_at)
        VALUES (p_queue, p_dedup_id, 'unique', NULL, NULL, v_expires, false, p_token, v_now)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
        SELECT * INTO v_owner FROM lane.dedup_owners
         WHERE dedup_id = p_dedup_id AND kind = 'unique' FOR UPDATE;
        IF NOT FOUND THEN  -- the conflict is a queue-scoped owner of p_queue
            SELECT * INTO v_owner FROM lane.dedup_owners
             WHERE queue = p_queue AND dedup_id = p_dedup_id FOR UPDATE;
        END IF;
        CONTINUE WHEN NOT FOUND;
        IF v_owner.job_key IS NULL AND v_owner.expires_at > v_now
           OR v_owner.job_key IS NOT NULL AND (lane._dedup_owner_job(v_owner, v_now)).key IS NOT NULL
        THEN
            RETURN v_owner.token IS NOT DISTINCT FROM p_token;
        END IF;
        -- Stale or expired (DEDUP-15): it goes, dropping a kept next job as every takeover
        -- does (DEDUP-18), and the insert again.
        DELETE FROM lane.dedup_owners WHERE queue = v_owner.queue AND dedup_id = p_dedup_id;
        PERFORM lane._dedup_next_dropped(v_owner.queue, p_dedup_id, v_owner.next_job, v_now);
    END LOOP;
END $$;

-- UNIQ-7, TX-10: frees p_dedup_id only while its row still carries p_token (the push that
-- took it), reserved or owned by a job, with any kept next job. A row of a newer push, or
-- without a token, is left alone (Laravel PR #59567): TTL expiry is its only end. With
-- p_reservation_only, only a reservation goes, never a row a job took over: a push whose
-- write failed gives its lock back, but not when the write did commit after all (an answer
-- lost on the way), so that job keeps its lock. True when a row went.
CREATE OR REPLACE FUNCTION lane.release_deduplication_key(p_queue text, p_dedup_id text,
                                                          p_token text,
                                                          p_reservation_only boolean
                                                              DEFAULT false)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_next jsonb;
BEGIN
    DELETE FROM lane.dedup_owners
     WHERE queue = p_queue AND dedup_id = p_dedup_id AND token = p_token
       AND (NOT p_reservation_only OR job_key IS NULL)
    RETURNING next_job INTO v_next;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM lane._dedup_next_dropped(p_queue, p_dedup_id, v_next, clock_timestamp());
    RETURN true;
END $$;

-- UNIQ-9..11 (the facade's push_debounced, Job.debounce_for): one dispatch of a debounce
-- window, read, decided and written in one call serialised on the window's owner row, so
-- of concurrent dispatches each sees the one before it. p_options carries the window as
-- delay_ms and deduplication {id, token, ...} (the window's key); p_max_wait_ms is UNIQ-10's
-- max_wait (NULL: none). The owner row's created_at is its burst's first dispatch. The
-- window's current job, if it still blocks:
-- * delayed and standalone (lane._dedup_replaceable): removed through lane._remove_jobs
--   (`removed prev=delayed`, as replace_delayed does), and replaced_id names it (the
--   facade emits JobDebounced for it); one in a flow or a repeat series is kept, as below;
-- * waiting or running: kept, but the window is this dispatch's now, so the worker drops
--   it unless it already started (UNIQ-11);
-- and this dispatch is stored `window` later, owning the window, its burst going on. Once
-- the burst has waited p_max_wait_ms, the dispatch is stored at once and without the window
-- (nothing supersedes it), and the window is released: the next dispatch starts a new
-- burst (UNIQ-10). Dispatches of one window are stored in the order they lock it: the job
-- left owning the window is the one with the greatest key.
CREATE OR REPLACE FUNCTION lane.add_debounced_job(p_queue text, p_name text, p_data jsonb,
                                                  p_options jsonb,
                                                  p_max_wait_ms bigint DEFAULT NULL,
                                                  p_now timestamptz DEFAULT NULL,
                                                  OUT job lane.jobs, OUT replaced_id text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_dedup jsonb := p_options -> 'deduplication';
    v_id text := v_dedup ->> 'id';
    v_token text := v_dedup ->> 'token';
    v_owner lane.dedup_owners;
    v_holder lane.jobs;
    v_first timestamptz := v_now;
BEGIN
    PERFORM lane._check_queue(p_queue);
    PERFORM lane._check_options(p_options);
    IF v_token IS NULL OR v_dedup ->> 'kind' = 'unique'
       OR v_dedup -> 'keep_last_if_active' IS NOT DISTINCT FROM 'true'::jsonb
       OR p_max_wait_ms IS NOT NULL
          AND p_max_wait_ms NOT BETWEEN 1 AND lane._max_duration_ms() THEN
        PERFORM lane._fail('LN003', format(
            'a debounced add needs deduplication {"id", "token"} (not unique, not keep-last) '
            'and a max wait of 1..%s ms or none, got %s and %s', lane._max_duration_ms(),
            coalesce(v_dedup::text, 'none'), coalesce(p_max_wait_ms::text, 'none')));
    END IF;
    LOOP  -- the window, locked; a first dispatch writes an empty row to lock
        SELECT * INTO v_owner FROM lane.dedup_owners
         WHERE queue = p_queue AND dedup_id = v_id FOR UPDATE;
        EXIT WHEN FOUND;
        INSERT INTO lane.dedup_owners (queue, dedup_id, kind, job_id, job_key, expires_at,
                                       keep_last, token, created_at)
        VALUES (p_queue, v_id, 'dedup', NULL, NULL, NULL, false, v_token, v_now)
        ON CONFLICT DO NOTHING;
    END LOOP;
    IF v_owner.job_key IS NOT NULL THEN
        v_holder := lane._dedup_owner_job(v_owner, v_now);
    END IF;
    IF v_holder.key IS NOT NULL THEN
        v_first := v_owner.created_at;  -- the burst goes on
        IF lane._dedup_replaceable(v_holder) THEN
            -- Locked, then checked again: promotion may have moved it meanwhile.
            SELECT * INTO v_holder FROM lane.jobs WHERE key = v_holder.key FOR UPDATE;
            IF lane._dedup_replaceable(v_holder) THEN
                -- The window stays locked but no longer names the job, so the removal
                -- (which releases only a row naming the removed job) leaves it.
                UPDATE lane.dedup_owners SET job_id = NULL, job_key = NULL
                 WHERE queue = p_queue AND dedup_id = v_id;
                PERFORM lane._remove_jobs(ARRAY[v_holder.key], v_now);
                replaced_id := v_holder.id;
            END IF;
        END IF;
    END IF;
    PERFORM lane._dedup_next_dropped(p_queue, v_id, v_owner.next_job, v_now);  -- DEDUP-18
    IF p_max_wait_ms IS NOT NULL AND v_now - v_first >= p_max_wait_ms * interval '1 millisecond'
    THEN
        DELETE FROM lane.dedup_owners WHERE queue = p_queue AND dedup_id = v_id;
        job := lane.add_job(p_queue, p_name, p_data,
                            (p_options - 'deduplication') || '{"delay_ms": 0}', v_now);
        RETURN;
    END IF;
    -- The window is this dispatch's: emptied here, taken over by the add below.
    UPDATE lane.dedup_owners
       SET job_id = NULL, job_key = NULL, expires_at = NULL, keep_last = false, next_job = NULL
     WHERE queue = p_queue AND dedup_id = v_id;
    job := lane.add_job(p_queue, p_name, p_data, p_options, v_now);
    UPDATE lane.dedup_owners SET created_at = v_first
     WHERE queue = p_queue AND dedup_id = v_id AND job_key = job.key;
    IF replaced_id IS NOT NULL THEN  -- DEDUP-2's pair, on the job that keeps the id
        PERFORM lane._dedup_events(p_queue, job.id, v_id, replaced_id, v_now);
    END IF;
END $$;
