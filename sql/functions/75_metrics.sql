-- lane_pg stored functions: Terminal metrics: per-minute completed/failed counts (OBS-6, MGMT-28).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- lane.metrics (migration 0001) holds, per queue and state, rows whose counts add up to
-- the minute they fall in. A finishing transaction adds to a row of its own connection:
-- minute = the minute's start + the backend's pid in microseconds (pids stay below
-- 2^22, so under 4.2 s into the minute, and no two live connections share one). One
-- row per (queue, state, minute) took a row lock that every worker of the queue waited
-- on until the holder committed (DESIGN.md: -30 % with 4 workers on a shared queue row);
-- a connection's own row is only ever waited on by itself. lane.compact_metrics (the
-- maintenance leader) folds a closed minute's rows into its start row, and the minutes
-- beyond the retained data points into one '-infinity' row, so the all-time count stays.
-- Measured (docs/decisions.md): see the line "Terminal metrics" there.

-- FIN-2 step 6, FIN-6: p_count jobs of p_queue finished in p_state. One VALUES row: the
-- caller counts its batch per queue, which it reads anyway (lane._complete).
CREATE OR REPLACE FUNCTION lane._count_finished(p_queue text, p_state text, p_count bigint,
                                                p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lane.metrics AS m (queue, state, minute, count)
    VALUES (p_queue, p_state,
            date_trunc('minute', p_now, 'UTC') + pg_backend_pid() * interval '1 microsecond',
            p_count)
    ON CONFLICT (queue, state, minute) DO UPDATE SET count = m.count + excluded.count;
END $$;

CREATE OR REPLACE FUNCTION lane._check_metrics_state(p_state text)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_state IS NULL OR p_state NOT IN ('completed', 'failed') THEN
        PERFORM lane._fail('LN003', format(
            'metrics are kept for the states completed and failed, got %L', p_state));
    END IF;
END $$;

CREATE OR REPLACE FUNCTION lane._check_data_points(p_max_points integer)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_max_points IS NULL OR p_max_points < 1 THEN
        PERFORM lane._fail('LN003', format(
            'max_data_points must be a positive integer, got %s', p_max_points));
    END IF;
END $$;

-- OBS-6: BullMQ's getMetrics. count: every job counted, ever; data: one count per minute,
-- newest first, from the newest minute with a count back over the retained minutes
-- (minutes without a job are 0), cut by the inclusive, possibly negative indexes
-- p_start..p_end (Redis LRANGE); data_points: the length of the whole list; prev_ts: the
-- newest minute's start (epoch ms); prev_count: count before that minute. The newest
-- minute is the open one BullMQ's list does not show yet (FEATURES OBS-6 counts it).
CREATE OR REPLACE FUNCTION lane.get_metrics(p_queue text, p_state text,
                                            p_start integer DEFAULT 0,
                                            p_end integer DEFAULT -1,
                                            p_max_points integer DEFAULT 20160)
RETURNS TABLE (count bigint, prev_ts bigint, prev_count bigint, data bigint[],
               data_points integer)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_total bigint;
    v_newest timestamptz;
    v_oldest timestamptz;
    v_first integer;
    v_last integer;
BEGIN
    PERFORM lane._check_metrics_state(p_state);
    PERFORM lane._check_data_points(p_max_points);
    IF p_start IS NULL OR p_end IS NULL THEN
        PERFORM lane._fail('LN003', 'metrics start and end must be integers');
    END IF;
    SELECT coalesce(sum(m.count), 0)::bigint,
           date_trunc('minute', max(m.minute) FILTER (WHERE m.minute > '-infinity'), 'UTC'),
           date_trunc('minute', min(m.minute) FILTER (WHERE m.minute > '-infinity'), 'UTC')
      INTO v_total, v_newest, v_oldest
      FROM lane.metrics m WHERE m.queue = p_queue AND m.state = p_state;
    count := v_total;
    IF v_newest IS NULL THEN
        prev_ts := 0;
        prev_count := v_total;
        data := '{}';
        data_points := 0;
        RETURN NEXT;
        RETURN;
    END IF;
    v_oldest := greatest(v_oldest, v_newest - (p_max_points - 1) * interval '1 minute');
    data_points := (extract(epoch FROM v_newest - v_oldest) / 60)::integer + 1;
    v_first := CASE WHEN p_start < 0 THEN greatest(data_points + p_start, 0) ELSE p_start END;
    v_last := least(CASE WHEN p_end < 0 THEN data_points + p_end ELSE p_end END,
                    data_points - 1);
    prev_ts := lane._epoch_ms(v_newest);
    prev_count := v_total - (SELECT coalesce(sum(m.count), 0) FROM lane.metrics m
                              WHERE m.queue = p_queue AND m.state = p_state
                                AND m.minute >= v_newest);
    data := ARRAY(
        WITH sums AS (
            SELECT date_trunc('minute', m.minute, 'UTC') AS minute, sum(m.count) AS n
              FROM lane.metrics m
             WHERE m.queue = p_queue AND m.state = p_state
               AND m.minute >= v_newest - v_last * interval '1 minute'
               AND m.minute < v_newest - (v_first - 1) * interval '1 minute'
             GROUP BY 1
        )
        SELECT coalesce(s.n, 0)::bigint
          FROM generate_series(v_first, v_last) AS i
          LEFT JOIN sums s ON s.minute = v_newest - i * interval '1 minute'
         ORDER BY i);
    RETURN NEXT;
END $$;

-- The maintenance leader's pass (lane_pg/worker/maintenance.py): every closed minute
-- (before p_now's) becomes one row, and the minutes beyond p_max_points of each queue's
-- newest fold into its '-infinity' row. Rows a finishing transaction holds are skipped
-- (the next pass takes them). Returns how many rows were folded away.
CREATE OR REPLACE FUNCTION lane.compact_metrics(p_max_points integer DEFAULT 20160,
                                                p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_closed timestamptz := date_trunc('minute', coalesce(p_now, clock_timestamp()), 'UTC');
    v_folded bigint;
BEGIN
    PERFORM lane._check_data_points(p_max_points);
    WITH newest AS (
        SELECT m.queue, m.state,
               date_trunc('minute', max(m.minute), 'UTC')
                   - (p_max_points - 1) * interval '1 minute' AS kept_from
          FROM lane.metrics m WHERE m.minute > '-infinity'
         GROUP BY m.queue, m.state
    ), movable AS (
        SELECT m.ctid AS row_ctid, m.minute < n.kept_from AS expired
          FROM lane.metrics m
          JOIN newest n ON n.queue = m.queue AND n.state = m.state
         WHERE m.minute > '-infinity'
           AND (m.minute < n.kept_from
                OR m.minute < v_closed AND m.minute <> date_trunc('minute', m.minute, 'UTC'))
           FOR UPDATE OF m SKIP LOCKED
    ), moved AS (
        DELETE FROM lane.metrics m USING movable v
         WHERE m.ctid = v.row_ctid
        RETURNING m.queue, m.state, m.count,
                  CASE WHEN v.expired THEN '-infinity'::timestamptz
                       ELSE date_trunc('minute', m.minute, 'UTC') END AS into_minute
    ), folded AS (
        INSERT INTO lane.metrics AS m (queue, state, minute, count)
        SELECT o.queue, o.state, o.into_minute, sum(o.count)
          FROM moved o GROUP BY o.queue, o.state, o.into_minute
        ON CONFLICT (queue, state, minute) DO UPDATE SET count = m.count + excluded.count
    )
    SELECT count(*) INTO v_folded FROM moved;
    RETURN v_folded;
END $$;

-- A queue's finished jobs per minute of the last hour with their wait and run
-- percentiles, oldest minute first: the rows of lane.v_throughput (sql/views.sql), which
-- holds the rule once. PL/pgSQL: its body is not checked against the view at creation
-- (the views are applied after the functions), and it takes no dependency on the view's
-- row type, so a downgrade drops the view and this function independently.
CREATE OR REPLACE FUNCTION lane.get_throughput(p_queue text)
RETURNS TABLE (minute timestamptz, completed bigint, failed bigint,
               wait_p50_ms float8, wait_p95_ms float8, wait_p99_ms float8,
               run_p50_ms float8, run_p95_ms float8, run_p99_ms float8)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT t.minute, t.completed, t.failed, t.wait_p50_ms, t.wait_p95_ms, t.wait_p99_ms,
           t.run_p50_ms, t.run_p95_ms, t.run_p99_ms
      FROM lane.v_throughput t WHERE t.queue = p_queue ORDER BY t.minute;
END $$;
