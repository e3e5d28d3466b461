-- lane_pg stored functions: Queue-level settings: pause, listing, retention bounds, event recording.
-- Applied in file-name order after the migrations, on every migrate (lane_pg/postgres/schema.py).

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
