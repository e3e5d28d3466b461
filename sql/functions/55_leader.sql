-- lane_pg stored functions: Leadership of the workers' maintenance (a lease in lane.leaders).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- One row per role: its holder and a lease on the database clock. The live leader renews
-- it several times per lease; any other worker takes it over once it lapsed, so a leader
-- that freezes (SIGSTOP, a stop-the-world pause) loses the role within one lease even
-- though its session, and any session lock, stays open. Holding the role fences nothing:
-- what a leader runs (recovery, promotion, pruning, trimming, vacuum) is safe to run twice,
-- and a resumed old leader's writes to jobs are refused by their lock tokens.

-- Takes or renews p_role for p_holder until p_now + p_lease_ms; true when p_holder holds it
-- afterwards, false (and nothing changes) while another holder's lease is running. The
-- UPDATE locks only a row it changes, so a candidate's failed attempt never waits for, or
-- blocks, the holder's renewal; term counts the holders the role has had.
CREATE OR REPLACE FUNCTION lane.acquire_leadership(p_role text, p_holder text,
                                                   p_lease_ms bigint,
                                                   p_now timestamptz DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_until timestamptz;
BEGIN
    IF p_role IS NULL OR p_role = '' OR p_holder IS NULL OR p_holder = '' THEN
        PERFORM lane._fail('LN000', format(
            'acquire_leadership needs a role and a holder, got %L and %L', p_role, p_holder));
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms <= 0 THEN
        PERFORM lane._fail('LN003', format('lease must be positive, got %s ms', p_lease_ms));
    END IF;
    v_until := v_now + p_lease_ms * interval '1 millisecond';
    UPDATE lane.leaders
       SET term = CASE WHEN holder = p_holder THEN term ELSE term + 1 END,
           elected_at = CASE WHEN holder = p_holder THEN elected_at ELSE v_now END,
           holder = p_holder,
           expires_at = v_until
     WHERE role = p_role AND (holder = p_holder OR expires_at < v_now);
    IF FOUND THEN
        RETURN true;
    END IF;
    INSERT INTO lane.leaders (role, holder, term, elected_at, expires_at)
    VALUES (p_role, p_holder, 1, v_now, v_until)
    ON CONFLICT (role) DO NOTHING;
    RETURN FOUND;
END $$;

-- Gives p_role up at once when p_holder holds it (its lease ends now, so the next
-- candidate need not wait for it to run out); false when p_holder held nothing.
CREATE OR REPLACE FUNCTION lane.resign_leadership(p_role text, p_holder text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    UPDATE lane.leaders SET expires_at = '-infinity'
     WHERE role = p_role AND holder = p_holder AND expires_at > '-infinity';
    RETURN FOUND;
END $$;

-- The workers' presence (lane.workers): each running worker calls worker_heartbeat every
-- few seconds and forget_worker when it stops; list_workers reads the live ones. A worker
-- killed without a word stops refreshing its row: list_workers leaves it out once its
-- heartbeat is older than p_stale_ms, and any heartbeat deletes rows silent for an hour.
CREATE OR REPLACE FUNCTION lane.worker_heartbeat(p_id text, p_hostname text, p_pid integer,
                                                 p_queues text[], p_meta jsonb DEFAULT NULL,
                                                 p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    IF p_id IS NULL OR p_id = '' THEN
        PERFORM lane._fail('LN000', 'worker_heartbeat needs a worker id');
    END IF;
    IF p_meta IS NOT NULL AND jsonb_typeof(p_meta) <> 'object' THEN
        PERFORM lane._fail('LN003', format('meta must be a JSON object, got %s', p_meta));
    END IF;
    INSERT INTO lane.workers AS w (id, hostname, pid, queues, started_at, heartbeat_at, meta)
    VALUES (p_id, coalesce(p_hostname, ''), p_pid, coalesce(p_queues, '{}'), v_now, v_now,
            coalesce(p_meta, '{}'))
    ON CONFLICT (id) DO UPDATE
       SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
           heartbeat_at = v_now, meta = EXCLUDED.meta;
    DELETE FROM lane.workers WHERE heartbeat_at < v_now - interval '1 hour';
END $$;

CREATE OR REPLACE FUNCTION lane.forget_worker(p_id text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM lane.workers WHERE id = p_id;
    RETURN FOUND;
END $$;

-- The workers heard from within p_stale_ms, oldest start first; leader: the worker holds
-- p_role's lease now.
CREATE OR REPLACE FUNCTION lane.list_workers(p_stale_ms bigint, p_role text,
                                             p_now timestamptz DEFAULT NULL)
RETURNS TABLE (id text, hostname text, pid integer, queues text[], started_at timestamptz,
               heartbeat_at timestamptz, leader boolean, meta jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    IF p_stale_ms IS NULL OR p_stale_ms <= 0 THEN
        PERFORM lane._fail('LN003', format('stale_after must be positive, got %s ms',
                                           coalesce(p_stale_ms::text, 'NULL')));
    END IF;
    RETURN QUERY
    SELECT w.id, w.hostname, w.pid, w.queues, w.started_at, w.heartbeat_at,
           EXISTS (SELECT 1 FROM lane.leaders l
                    WHERE l.role = p_role AND l.holder = w.id AND l.expires_at >= v_now),
           w.meta
      FROM lane.workers w
     WHERE w.heartbeat_at >= v_now - p_stale_ms * interval '1 millisecond'
     ORDER BY w.started_at, w.id;
END $$;
