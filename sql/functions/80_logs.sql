-- lane_pg stored functions: Job logs (MGMT-13..15).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

-- MGMT-13: returns the number of entries kept. Logs write no event (EVS-5). With p_token
-- (a run's log line) the job must be active under exactly that token, else LN005 and no
-- line is written; NULL is an administrator's call (lane._writable_job_key).
CREATE OR REPLACE FUNCTION lane.add_job_log(p_queue text, p_id text, p_message text,
                                            p_keep integer DEFAULT NULL,
                                            p_now timestamptz DEFAULT NULL,
                                            p_token uuid DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint := lane._writable_job_key(p_queue, p_id, p_token);
    v_count integer;
BEGIN
    IF p_keep IS NOT NULL AND p_keep < 0 THEN
        PERFORM lane._fail('LN003', format('keep must not be negative, got %s', p_keep));
    END IF;
    INSERT INTO lane.job_logs (job_key, ts, message)
    VALUES (v_key, coalesce(p_now, clock_timestamp()), coalesce(p_message, ''));
    IF p_keep IS NOT NULL THEN
        PERFORM lane._trim_logs(v_key, p_keep);
    END IF;
    SELECT count(*) INTO v_count FROM lane.job_logs WHERE job_key = v_key;
    RETURN v_count;
END $$;

CREATE OR REPLACE FUNCTION lane._trim_logs(p_key bigint, p_keep integer)
RETURNS void LANGUAGE sql AS $$
    DELETE FROM lane.job_logs
     WHERE job_key = p_key
       AND seq NOT IN (SELECT seq FROM lane.job_logs WHERE job_key = p_key
                        ORDER BY seq DESC LIMIT p_keep)
$$;

-- MGMT-14: Redis LRANGE windows over the log (oldest first, or newest first when not
-- ascending); inclusive indices, negative ones counted from the end.
CREATE OR REPLACE FUNCTION lane.get_job_logs(p_queue text, p_id text, p_start integer DEFAULT 0,
                                             p_end integer DEFAULT -1, p_asc boolean DEFAULT true)
RETURNS TABLE (count integer, ts timestamptz[], messages text[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_key bigint;
    v_first integer;
    v_last integer;
BEGIN
    v_key := lane._find_key(p_queue, p_id);
    SELECT count(*)::integer INTO count FROM lane.job_logs WHERE job_key = v_key;
    v_first := CASE WHEN p_start < 0 THEN greatest(count + p_start, 0) ELSE p_start END;
    v_last := CASE WHEN p_end < 0 THEN count + p_end ELSE least(p_end, count - 1) END;
    IF v_key IS NULL OR v_first > v_last THEN
        ts := '{}';
        messages := '{}';
    ELSE
        SELECT coalesce(array_agg(l.ts ORDER BY l.n), '{}'), coalesce(array_agg(l.message ORDER BY l.n), '{}')
          INTO ts, messages
          FROM (SELECT g.ts, g.message,
                       row_number() OVER (ORDER BY CASE WHEN p_asc THEN g.seq ELSE -g.seq END) - 1 AS n
                  FROM lane.job_logs g WHERE g.job_key = v_key) l
         WHERE l.n BETWEEN v_first AND v_last;
    END IF;
    RETURN NEXT;
END $$;

-- MGMT-15
CREATE OR REPLACE FUNCTION lane.clear_job_logs(p_queue text, p_id text, p_keep integer DEFAULT 0)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_key bigint;
BEGIN
    IF p_keep IS NULL OR p_keep < 0 THEN
        PERFORM lane._fail('LN003', format('keep must not be negative, got %s', p_keep));
    END IF;
    v_key := lane._job_key(p_queue, p_id);
    PERFORM lane._trim_logs(v_key, p_keep);
END $$;
