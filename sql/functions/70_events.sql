-- lane_pg stored functions: The retained event stream: reads and trimming (EVS).
-- Applied in file-name order after the migrations, on every migrate (lane_pg/postgres/schema.py).

-- EVS-2: events with ids in [p_start, p_end] (NULL = open end), in id order.
CREATE OR REPLACE FUNCTION lane.read_events(p_queue text, p_start bigint DEFAULT NULL,
                                            p_end bigint DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS SETOF lane.events LANGUAGE sql STABLE AS $$
    SELECT * FROM lane.events
     WHERE queue = p_queue
       AND id >= coalesce(p_start, 0) AND id <= coalesce(p_end, 9223372036854775807)
     ORDER BY id
     LIMIT greatest(p_limit, 0)
$$;

-- EVS-3: trims each queue's events (all queues when NULL) to its max_events, newest kept.
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
        SELECT id INTO v_cut FROM lane.events WHERE queue = v_queue
         ORDER BY id DESC OFFSET v_max LIMIT 1;
        CONTINUE WHEN v_cut IS NULL;
        DELETE FROM lane.events WHERE queue = v_queue AND id <= v_cut;
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        v_total := v_total + v_deleted;
    END LOOP;
    RETURN v_total;
END $$;
