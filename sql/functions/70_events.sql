-- lane_pg stored functions: The retained event stream: reads and trimming (EVS).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

-- Every event, one row each (SQLR-1: report with plain SQL). A batch row of lane.events
-- (job_ids set, migration 0007) gives one event per job id, with the ids row_id ..
-- row_id + n - 1; a single row gives itself.
CREATE OR REPLACE VIEW lane.event_log AS
SELECT e.id + s.k - 1 AS id, e.queue, e.event, s.job_id, coalesce(s.data, e.data) AS data,
       e.created_at, e.id AS row_id
  FROM lane.events e
 CROSS JOIN LATERAL unnest(coalesce(e.job_ids, ARRAY[e.job_id]), e.datas)
       WITH ORDINALITY AS s(job_id, data, k);

-- EVS-2: events with ids in [p_start, p_end] (NULL = open end), in id order. A batch's
-- ids start at most 1,023 above its row id, hence the bound on row_id that the primary
-- key serves.
CREATE OR REPLACE FUNCTION lane.read_events(p_queue text, p_start bigint DEFAULT NULL,
                                            p_end bigint DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS SETOF lane.events LANGUAGE sql STABLE AS $$
    SELECT l.id, l.queue, l.event, l.job_id, l.data, l.created_at, NULL::text[], NULL::jsonb[]
      FROM lane.event_log l
     WHERE l.queue = p_queue
       AND l.row_id >= coalesce(p_start, 0) - 1023
       AND l.row_id <= coalesce(p_end, lane._max_bigint())
       AND l.id >= coalesce(p_start, 0) AND l.id <= coalesce(p_end, lane._max_bigint())
     ORDER BY l.row_id, l.id
     LIMIT greatest(p_limit, 0)
$$;

-- EVS-3: trims each queue's events (all queues when NULL) to its max_events, newest kept;
-- returns how many events went.
CREATE OR REPLACE FUNCTION lane.trim_events(p_queues text[] DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_queue text;
    v_max integer;
    v_cut bigint;
    v_deleted bigint;
    v_total bigint := 0;
BEGIN
    FOR v_queue, v_max IN
        SELECT name, max_events FROM lane.queues
         WHERE p_queues IS NULL OR name = ANY (p_queues) ORDER BY name
    LOOP
        -- The newest row whose newer rows hold max_events events already: it and every
        -- older row go. A batch row counts its events, so up to 1,023 more may stay.
        SELECT t.id INTO v_cut
          FROM (SELECT r.id,
                       sum(r.n) OVER (ORDER BY r.id DESC ROWS UNBOUNDED PRECEDING) - r.n
                           AS newer
                  FROM (SELECT e.id, coalesce(cardinality(e.job_ids), 1) AS n
                          FROM lane.events e WHERE e.queue = v_queue) r
                 ORDER BY r.id DESC) t
         WHERE t.newer >= v_max
         LIMIT 1;
        CONTINUE WHEN v_cut IS NULL;
        WITH gone AS (
            DELETE FROM lane.events WHERE queue = v_queue AND id <= v_cut
            RETURNING coalesce(cardinality(job_ids), 1) AS n
        )
        SELECT coalesce(sum(n), 0) INTO v_deleted FROM gone;
        v_total := v_total + v_deleted;
    END LOOP;
    RETURN v_total;
END $$;

-- EVS-7: how far a subscriber may read without missing an event a transaction still
-- writes. Ids are handed out before commit, so a committed id can overtake a lower one
-- that is still being written. last_id: the newest row id handed out (lane.events'
-- identity, cache 1); writers: the transactions that hold lane.events open for writing,
-- read after it. A transaction that took an id up to last_id either ended before the
-- writers were read (its rows are visible to any later statement, or rolled back) or
-- is among them; once none of them is left, every event up to last_id + 1023 (the
-- sub-events of a batch row) is final. Nothing on the write paths pays for this: a
-- subscriber polls (lane_pg/postgres/events.py); docs/decisions.md has the numbers.
-- A long transaction that wrote events holds the subscribers back until it ends.
CREATE OR REPLACE FUNCTION lane.event_horizon(OUT last_id bigint, OUT writers text[])
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    last_id := coalesce(pg_sequence_last_value('lane.events_id_seq'::regclass), 0);
    writers := ARRAY(SELECT l.virtualtransaction FROM pg_locks l
                      WHERE l.locktype = 'relation' AND l.relation = 'lane.events'::regclass
                        AND l.database = (SELECT d.oid FROM pg_database d
                                           WHERE d.datname = current_database())
                        AND l.mode = 'RowExclusiveLock'
                        AND l.pid IS DISTINCT FROM pg_backend_pid()  -- prepared ones too
                      ORDER BY 1);
END $$;

-- An operator's action (a dashboard's pause, retry, ...) as event 'action' of the queue,
-- for an audit: nothing for a queue that does not exist (none is created) or that records
-- no events. p_data is the checked event data (action_event_data in
-- lane_pg/backend/events.py). Returns the event's id, or NULL when none was written.
CREATE OR REPLACE FUNCTION lane.record_action(p_queue text, p_job_id text, p_data jsonb,
                                              p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO lane.events (queue, event, job_id, data, created_at)
    SELECT p_queue, 'action', p_job_id, p_data, coalesce(p_now, clock_timestamp())
      FROM lane.queues q WHERE q.name = p_queue AND q.record_events
    RETURNING id
$$;
