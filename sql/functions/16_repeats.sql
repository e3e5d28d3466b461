-- lane_pg stored functions: Repeatable jobs (REP).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- A series is one lane.repeat_schedulers row per (queue, key) naming its owner: the one
-- unfinished occurrence (jobs_repeat_owner_idx makes a second one uncommittable, migration
-- 0010). The schedule lives only here and in the owner's row, never in a process (River's
-- weekly jobs never ran when services restarted more often than weekly): completing the
-- owner writes the next occurrence in the same transaction (REP-2), with the series row
-- locked, so two workers completing, a crash loop, or adds and upserts racing each other
-- cannot make two occurrences of one tick (BullMQ #2988, #2876). next_at is the tick the
-- owner was scheduled for, the anchor of the next one (lane._repeat_next, 08_schedule.sql).
--
-- Catch-up after downtime: the owner waiting for a tick that passed runs once, as soon as
-- a worker is back; its successor is the first tick after that run (the ticks missed in
-- between are skipped, not run in a burst).

-- The key of a series: the document's "key", else the job name with the schedule.
CREATE OR REPLACE FUNCTION lane._repeat_key(p_name text, p_repeat jsonb)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(p_repeat ->> 'key',
                    p_name || ':' || coalesce('every:' || (p_repeat ->> 'every_ms'),
                                              'cron:' || (p_repeat ->> 'pattern')
                                              || coalesce(':' || (p_repeat ->> 'tz'), '')))
$$;

-- The owner occurrence of a series row when it is still its owner: it exists, is in the
-- row's queue, carries the series key and has not finished (REP-6, REP-11). NULL else.
CREATE OR REPLACE FUNCTION lane._repeat_owner(p_row lane.repeat_schedulers)
RETURNS lane.jobs LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_job lane.jobs;
BEGIN
    SELECT * INTO v_job FROM lane.jobs WHERE key = p_row.job_key;
    IF NOT FOUND OR v_job.queue <> p_row.queue OR v_job.repeat_key IS DISTINCT FROM p_row.key
       OR v_job.state IN ('completed', 'failed') THEN
        RETURN NULL;
    END IF;
    RETURN v_job;
END $$;

-- An add's claim on its series (REP-1..6), for the new job (p_key, p_id) about to be
-- stored from (p_name, p_data, p_options): owner_key is the live owner's key when the
-- series has one (the caller stores nothing and returns it; `duplicated` on the owner);
-- otherwise the new job is the series' next occurrence, due at due_at (its tick exactly):
-- * no row, or one whose owner is gone, failed or not its own: a new series, its first
--   tick lane._repeat_next(doc, NULL, p_now), the row rebuilt whole (REP-13);
-- * a row whose owner completed (in this transaction: lane._repeat_finish, the only one
--   that leaves a completed owner behind the row lock): the successor (REP-2), anchored
--   to the owner's tick, counted.
-- LN003 when the series has no occurrence left (end_at passed, ADD-13), whatever the row.
CREATE OR REPLACE FUNCTION lane._repeat_take(p_queue text, p_key bigint, p_id text,
                                             p_name text, p_data jsonb, p_options jsonb,
                                             p_now timestamptz,
                                             OUT owner_key bigint, OUT due_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_repeat jsonb := p_options -> 'repeat';
    v_series text := lane._repeat_key(p_name, p_options -> 'repeat');
    v_template jsonb := jsonb_build_object('name', p_name, 'data', p_data, 'options', p_options);
    v_end timestamptz := to_timestamp((v_repeat ->> 'end_at')::numeric / 1000);
    v_first timestamptz := lane._repeat_next(v_repeat, NULL, p_now);
    v_next timestamptz;
    v_row lane.repeat_schedulers;
    v_job lane.jobs;
BEGIN
    IF v_first IS NULL THEN
        PERFORM lane._fail('LN003', format(
            'repeat series %L has no occurrence left: its end_at %s has passed', v_series,
            v_end));
    END IF;
    LOOP
        INSERT INTO lane.repeat_schedulers (queue, key, job_id, job_key, name, every_ms,
                                            pattern, tz, limit_count, count, start_at,
                                            end_at, next_at, template, updated_at)
        VALUES (p_queue, v_series, p_id, p_key, p_name, (v_repeat ->> 'every_ms')::bigint,
                v_repeat ->> 'pattern', v_repeat ->> 'tz', (v_repeat ->> 'limit')::integer,
                1, p_now, v_end, v_first, v_template, p_now)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            EXIT;
        END IF;
        SELECT * INTO v_row FROM lane.repeat_schedulers
         WHERE queue = p_queue AND key = v_series FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        SELECT * INTO v_job FROM lane.jobs WHERE key = v_row.job_key;
        IF FOUND AND v_job.queue = p_queue AND v_job.repeat_key = v_series THEN
            IF v_job.state NOT IN ('completed', 'failed') THEN
                owner_key := v_job.key;
                PERFORM lane._emit(p_queue, 'duplicated', v_job.id, '{}', p_now);
                RETURN;
            ELSIF v_job.state = 'completed' THEN
                v_next := lane._repeat_next(v_row.template -> 'options' -> 'repeat',
                                            v_row.next_at, p_now);
                IF v_next IS NULL THEN
                    PERFORM lane._fail('LN003', format(
                        'repeat series %L of queue %s has no occurrence left', v_series,
                        p_queue));
                END IF;
                UPDATE lane.repeat_schedulers
                   SET job_id = p_id, job_key = p_key, count = count + 1, next_at = v_next,
                       updated_at = p_now
                 WHERE queue = p_queue AND key = v_series;
                due_at := v_next;
                RETURN;
            END IF;
        END IF;
        UPDATE lane.repeat_schedulers
           SET job_id = p_id, job_key = p_key, name = p_name,
               every_ms = (v_repeat ->> 'every_ms')::bigint, pattern = v_repeat ->> 'pattern',
               tz = v_repeat ->> 'tz', limit_count = (v_repeat ->> 'limit')::integer, count = 1,
               start_at = p_now, end_at = v_end, next_at = v_first, template = v_template,
               updated_at = p_now
         WHERE queue = p_queue AND key = v_series;
        EXIT;
    END LOOP;
    due_at := v_first;
END $$;

-- REP-2, -3, -4: for each of the given jobs, just completed and locked by the caller, that
-- still owns its series: the next occurrence, through the add path (its events, wake-up
-- and row), unless the limit is reached or the next tick is after end_at, which ends the
-- series (its row goes).
CREATE OR REPLACE FUNCTION lane._repeat_finish(p_keys bigint[], p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_row lane.repeat_schedulers;
BEGIN
    FOR v_row IN
        SELECT s.* FROM lane.jobs j
          JOIN lane.repeat_schedulers s
            ON s.queue = j.queue AND s.key = j.repeat_key AND s.job_key = j.key
         WHERE j.key = ANY (p_keys) AND j.repeat_key IS NOT NULL
         ORDER BY s.queue, s.key
           FOR UPDATE OF s
    LOOP
        IF v_row.count >= coalesce(v_row.limit_count, lane._max_int())
           OR lane._repeat_next(v_row.template -> 'options' -> 'repeat', v_row.next_at, p_now)
              IS NULL THEN
            DELETE FROM lane.repeat_schedulers WHERE queue = v_row.queue AND key = v_row.key;
        ELSE
            PERFORM lane._store_jobs(v_row.queue, ARRAY[v_row.template ->> 'name'],
                                     ARRAY[v_row.template -> 'data'],
                                     ARRAY[v_row.template -> 'options'], p_now);
        END IF;
    END LOOP;
END $$;

-- REP-7: a job that fails for good or is deleted ends its series, but only while the row
-- still names it.
CREATE OR REPLACE FUNCTION lane._repeat_release(p_job lane.jobs)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_job.repeat_key IS NOT NULL THEN
        DELETE FROM lane.repeat_schedulers
         WHERE queue = p_job.queue AND key = p_job.repeat_key AND job_key = p_job.key;
    END IF;
END $$;

-- REP-15: a retried occurrence owns its series again (a series ended by its failure starts
-- again from it); LN010 while another unfinished occurrence owns it.
CREATE OR REPLACE FUNCTION lane._repeat_reclaim(p_job lane.jobs, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_row lane.repeat_schedulers;
    v_owner lane.jobs;
    v_repeat jsonb := p_job.options -> 'repeat';
BEGIN
    IF p_job.repeat_key IS NULL THEN
        RETURN;
    END IF;
    LOOP
        SELECT * INTO v_row FROM lane.repeat_schedulers
         WHERE queue = p_job.queue AND key = p_job.repeat_key FOR UPDATE;
        IF FOUND THEN
            v_owner := lane._repeat_owner(v_row);
            IF v_owner.key IS NOT NULL AND v_owner.key <> p_job.key THEN
                PERFORM lane._fail('LN010', format(
                    'repeat series %L of queue %s is owned by job %s: job %s cannot be '
                    'retried while it runs', p_job.repeat_key, p_job.queue, v_owner.id,
                    p_job.id));
            END IF;
            UPDATE lane.repeat_schedulers
               SET job_id = p_job.id, job_key = p_job.key, next_at = p_now, updated_at = p_now
             WHERE queue = p_job.queue AND key = p_job.repeat_key;
            RETURN;
        END IF;
        INSERT INTO lane.repeat_schedulers (queue, key, job_id, job_key, name, every_ms,
                                            pattern, tz, limit_count, count, start_at,
                                            end_at, next_at, template, updated_at)
        VALUES (p_job.queue, p_job.repeat_key, p_job.id, p_job.key, p_job.name,
                (v_repeat ->> 'every_ms')::bigint, v_repeat ->> 'pattern', v_repeat ->> 'tz',
                (v_repeat ->> 'limit')::integer, 1, p_now,
                to_timestamp((v_repeat ->> 'end_at')::numeric / 1000), p_now,
                jsonb_build_object('name', p_job.name, 'data', p_job.data,
                                   'options', p_job.options), p_now)
        ON CONFLICT DO NOTHING;
        EXIT WHEN FOUND;
    END LOOP;
END $$;

-- REP-11, -12: the live series of a queue (rows whose owner is gone, finished or not its
-- own are deleted on the way), ordered by the owner's due time, descending unless p_asc,
-- entries p_start .. p_end inclusive (p_end -1: to the end). next_at is when the owner is
-- due (after a reschedule, the new time: REP-14); count, the occurrences so far.
CREATE OR REPLACE FUNCTION lane.list_repeats(p_queue text, p_start integer DEFAULT 0,
                                             p_end integer DEFAULT -1,
                                             p_asc boolean DEFAULT false)
RETURNS TABLE (key text, job_id text, name text, next_at timestamptz, count integer,
               every_ms bigint, pattern text, tz text, limit_count integer,
               end_at timestamptz, options jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM lane.repeat_schedulers s
     WHERE s.queue = p_queue AND (lane._repeat_owner(s)).key IS NULL;
    RETURN QUERY
    SELECT s.key, j.id, s.name, j.available_at, s.count, s.every_ms, s.pattern, s.tz,
           s.limit_count, s.end_at, s.template -> 'options'
      FROM lane.repeat_schedulers s
      JOIN lane.jobs j ON j.key = s.job_key
     WHERE s.queue = p_queue
     ORDER BY CASE WHEN p_asc THEN j.available_at END ASC,
              CASE WHEN NOT p_asc THEN j.available_at END DESC, s.key
    OFFSET greatest(p_start, 0)
     LIMIT CASE WHEN p_end < 0 THEN NULL ELSE greatest(p_end - greatest(p_start, 0) + 1, 0) END;
END $$;

CREATE OR REPLACE FUNCTION lane.count_repeats(p_queue text)
RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM lane.repeat_schedulers s
     WHERE s.queue = p_queue AND (lane._repeat_owner(s)).key IS NULL;
    RETURN (SELECT count(*) FROM lane.repeat_schedulers s WHERE s.queue = p_queue);
END $$;

-- REP-8, -9, -13: replaces the series' owner, unless it runs (LN006) or belongs to a flow
-- (LN006): the old owner goes through the removal path (`removed`, its dedup id released)
-- and the new job starts the series again from p_now, its row rebuilt whole. Returns the
-- new owner.
CREATE OR REPLACE FUNCTION lane.upsert_repeat(p_queue text, p_name text, p_data jsonb,
                                              p_options jsonb, p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_options jsonb := coalesce(p_options, '{}'::jsonb);
    v_row lane.repeat_schedulers;
    v_owner lane.jobs;
    v_key bigint;
BEGIN
    PERFORM lane._check_queue(p_queue);
    PERFORM lane._check_name(p_name);
    PERFORM lane._check_options(v_options);
    IF jsonb_typeof(v_options -> 'repeat') IS DISTINCT FROM 'object' THEN
        PERFORM lane._fail('LN003', 'upsert_repeat needs options with a "repeat" document');
    END IF;
    PERFORM lane._ensure_queue(p_queue);
    SELECT * INTO v_row FROM lane.repeat_schedulers
     WHERE queue = p_queue AND key = lane._repeat_key(p_name, v_options -> 'repeat')
       FOR UPDATE;
    IF FOUND THEN
        v_owner := lane._repeat_owner(v_row);
        IF v_owner.key IS NOT NULL THEN
            -- SKIP LOCKED: a claim or a completion holding the owner's row (its completion
            -- waits for the series row this call holds) makes it busy, not a deadlock.
            SELECT * INTO v_owner FROM lane.jobs WHERE key = v_owner.key FOR UPDATE SKIP LOCKED;
            IF NOT FOUND OR v_owner.state = 'active' OR v_owner.parent_id IS NOT NULL THEN
                PERFORM lane._fail('LN006', format(
                    'job %s owns repeat series %L and is %s: it cannot be replaced',
                    v_row.job_id, v_row.key,
                    CASE WHEN v_owner.key IS NULL THEN 'being claimed or finished'
                         WHEN v_owner.state = 'active' THEN 'active' ELSE 'in a flow' END));
            END IF;
            PERFORM lane._dedup_release(v_owner, v_now);
            DELETE FROM lane.job_logs WHERE job_key = v_owner.key;
            DELETE FROM lane.jobs WHERE key = v_owner.key;
            PERFORM lane._emit(p_queue, 'removed', v_owner.id,
                               jsonb_build_object('prev', v_owner.state), v_now);
        END IF;
    END IF;
    v_key := (lane._store_jobs(p_queue, ARRAY[p_name], ARRAY[p_data], ARRAY[v_options],
                               v_now)).keys[1];
    SELECT * INTO v_owner FROM lane.jobs WHERE key = v_key;
    RETURN v_owner;
END $$;

-- REP-10: removes the series and its owner through the removal path; the removed owner's
-- id, or NULL when the series has none. LN007 while the owner runs under a valid lease.
CREATE OR REPLACE FUNCTION lane.remove_repeat(p_queue text, p_key text,
                                              p_now timestamptz DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_row lane.repeat_schedulers;
    v_owner lane.jobs;
BEGIN
    SELECT * INTO v_row FROM lane.repeat_schedulers
     WHERE queue = p_queue AND key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_owner := lane._repeat_owner(v_row);
    IF v_owner.state = 'active' AND v_owner.lease_expires_at >= v_now THEN
        -- Before waiting for its row: its completion waits for the series row held here.
        PERFORM lane._fail('LN007', format(
            'job %s owns repeat series %L and is active under a lease until %s: it cannot '
            'be removed', v_owner.id, p_key, v_owner.lease_expires_at));
    END IF;
    DELETE FROM lane.repeat_schedulers WHERE queue = p_queue AND key = p_key;
    IF v_owner.key IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM lane.remove_job(p_queue, v_owner.id, v_now);
    RETURN v_owner.id;
END $$;
