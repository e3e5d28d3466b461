-- lane_pg stored functions: Queue-level settings: pause, listing, retention bounds, event recording.
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

-- PAUSE-1: adds and promotion go on while paused; only claims stop.
CREATE OR REPLACE FUNCTION lane.pause_queue(p_queue text, p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues SET paused = true WHERE name = p_queue;
    PERFORM lane._emit(p_queue, 'paused', NULL, '{}', coalesce(p_now, clock_timestamp()));
END $$;

CREATE OR REPLACE FUNCTION lane.resume_queue(p_queue text, p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues SET paused = false WHERE name = p_queue;
    PERFORM lane._emit(p_queue, 'resumed', NULL, '{}', coalesce(p_now, clock_timestamp()));
    PERFORM lane._wake(p_queue);
END $$;

CREATE OR REPLACE FUNCTION lane.is_queue_paused(p_queue text)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT paused FROM lane.queues WHERE name = p_queue), false)
$$;

-- The queues that exist, by name: what a worker serving "every queue" claims from.
CREATE OR REPLACE FUNCTION lane.list_queues()
RETURNS SETOF text LANGUAGE sql STABLE AS $$
    SELECT name FROM lane.queues ORDER BY name
$$;

-- The bounded default retention (docs/decisions.md): a queue keeps its newest
-- keep_completed completed and keep_failed failed jobs (defaults 10,000 and 100,000, the
-- lane.queues column defaults); NULL keeps all (RET-1's "indefinitely", per queue).
-- Per-job remove_on_complete / remove_on_fail (RET-2..5) still apply at finish time; this
-- bound is an extra cap that lane.prune_finished enforces afterwards, in the background.
CREATE OR REPLACE FUNCTION lane.set_queue_retention(p_queue text, p_keep_completed integer,
                                                    p_keep_failed integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF p_keep_completed < 0 OR p_keep_failed < 0 THEN
        PERFORM lane._fail('LN003', format(
            'keep_completed and keep_failed must not be negative (NULL keeps all), got %s and %s',
            coalesce(p_keep_completed::text, 'NULL'), coalesce(p_keep_failed::text, 'NULL')));
    END IF;
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues SET keep_completed = p_keep_completed, keep_failed = p_keep_failed
     WHERE name = p_queue;
END $$;

-- One row: the queue's bounds, or the defaults for a queue that does not exist yet (they
-- must equal the column defaults of lane.queues; tests/postgres/test_retention_sql.py).
CREATE OR REPLACE FUNCTION lane.get_queue_retention(p_queue text)
RETURNS TABLE (keep_completed integer, keep_failed integer) LANGUAGE sql STABLE AS $$
    SELECT q.keep_completed, q.keep_failed FROM lane.queues q WHERE q.name = p_queue
    UNION ALL
    SELECT 10000, 100000 WHERE NOT EXISTS (SELECT 1 FROM lane.queues q WHERE q.name = p_queue)
$$;

-- Whether the queue's job transitions write lane.events rows (ADD-9, CLAIM-1, FIN-1, ...;
-- on by default, the lane.queues column default). Off saves an INSERT per transition on
-- the hot path for queues nobody reads the stream of; the rows already written stay
-- readable (lane.read_events) and are trimmed as before (lane.trim_events).
CREATE OR REPLACE FUNCTION lane.set_queue_events(p_queue text, p_record boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF p_record IS NULL THEN
        PERFORM lane._fail('LN003', 'record_events must be true or false, got NULL');
    END IF;
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues SET record_events = p_record WHERE name = p_queue;
END $$;

-- true for a queue that does not exist yet (it will record when created).
CREATE OR REPLACE FUNCTION lane.get_queue_events(p_queue text)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT record_events FROM lane.queues WHERE name = p_queue), true)
$$;

-- The name README documented before names followed one convention (docs/decisions.md);
-- kept for SQL callers.
CREATE OR REPLACE FUNCTION lane.queue_records_events(p_queue text)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT lane.get_queue_events(p_queue)
$$;

-- PAUSE-4 (A8, A22): the connection-wide pause, the lane.settings row 'paused_all' and
-- its copy on every queue row (lane.queues.paused_all, read by lane.claim_jobs in the
-- queue-row SELECT it makes anyway). The settings row first: see lane._all_paused.
-- Queue pauses (lane.queues.paused) are left as they are, so resume_all does not lift
-- them. No queue event: the switch is not one queue's.
CREATE OR REPLACE FUNCTION lane.pause_all(p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lane.settings AS s (key, value, updated_at)
    VALUES ('paused_all', 'true', coalesce(p_now, clock_timestamp()))
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;
    UPDATE lane.queues SET paused_all = true WHERE NOT paused_all;
END $$;

-- Lifts the connection-wide pause and wakes the claimers of every queue it held back.
CREATE OR REPLACE FUNCTION lane.resume_all(p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_queue text;
BEGIN
    INSERT INTO lane.settings AS s (key, value, updated_at)
    VALUES ('paused_all', 'false', coalesce(p_now, clock_timestamp()))
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;
    FOR v_queue IN
        UPDATE lane.queues SET paused_all = false WHERE paused_all RETURNING name
    LOOP
        PERFORM lane._wake(v_queue);
    END LOOP;
END $$;

-- PAUSE-5, PAUSE-7, CLI-6: what a worker (or Q.is_paused) asks outside the claim, in one
-- round trip: the connection-wide pause, the paused ones among p_queues (their own flag;
-- a queue that does not exist is not paused; NULL: every paused queue, for a worker of
-- every queue), and the restart signal (ms since the epoch, NULL when none was given).
CREATE OR REPLACE FUNCTION lane.pause_status(p_queues text[] DEFAULT '{}')
RETURNS TABLE (all_paused boolean, paused text[], restart_at bigint)
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT s.value = 'true'::jsonb FROM lane.settings s
                      WHERE s.key = 'paused_all'), false),
           coalesce((SELECT array_agg(q.name ORDER BY q.name) FROM lane.queues q
                      WHERE (p_queues IS NULL OR q.name = ANY (p_queues)) AND q.paused),
                    '{}'),
           (SELECT (s.value #>> '{}')::bigint FROM lane.settings s WHERE s.key = 'restart_at')
$$;

-- CLI-6: workers started before this moment exit at their next signal check. Stored as
-- milliseconds since the epoch (lane.settings 'restart_at'); returns them. Wakes every
-- queue's idle claimers so they look now rather than at their next poll.
CREATE OR REPLACE FUNCTION lane.signal_restart(p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_ms bigint := floor(extract(epoch FROM coalesce(p_now, clock_timestamp())) * 1000);
    v_queue text;
BEGIN
    INSERT INTO lane.settings AS s (key, value, updated_at)
    VALUES ('restart_at', to_jsonb(v_ms), coalesce(p_now, clock_timestamp()))
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;
    FOR v_queue IN SELECT name FROM lane.queues LOOP
        PERFORM lane._wake(v_queue);
    END LOOP;
    RETURN v_ms;
END $$;
