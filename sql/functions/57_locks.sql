-- lane_pg stored functions: Locks and limiters of job middleware (MW-3..6, MW-10), in
-- lane.locks and lane.limiters (migration 0021).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- Each function is one statement on its row, so two workers racing for one key take
-- turns on that row: INSERT ... ON CONFLICT DO UPDATE locks the row it updates and
-- re-reads it after a concurrent writer committed. Laravel's rate limiter checks and then
-- hits (two cache calls), which lets every worker between the two through.

-- MW-3: takes p_key for the run (p_queue, p_id, p_token) until p_now + p_ttl_ms. True when
-- the run holds it afterwards: the key was free, its expiry passed, its holder's run is
-- over (the holder job is gone or no longer active under the holder's token: a worker that
-- died held it only until stalled recovery took its job back), or the run already held it
-- (its expiry is renewed). False, and nothing changes, while another live run holds it.
-- The caller must be active under p_token (LN004 / LN005 otherwise, nothing written).
--
-- The key's row is locked first, and the holder's run checked by a later statement: in
-- READ COMMITTED each statement of this function reads a fresh snapshot, taken after the
-- row lock was granted, so a holder that took the key while this call waited is seen with
-- its claim committed. One INSERT ... ON CONFLICT DO UPDATE WHERE <holder not active> read
-- the holder with the snapshot of the statement's start: a holder claimed after that
-- looked inactive, and two runs held one key (a test races exactly that).
CREATE OR REPLACE FUNCTION lane.acquire_lock(p_key text, p_queue text, p_id text,
                                             p_token uuid, p_ttl_ms bigint,
                                             p_now timestamptz DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_until timestamptz;
    v_job lane.jobs;
    v_lock lane.locks;
BEGIN
    IF p_key IS NULL OR p_key = '' THEN
        PERFORM lane._fail('LN000', 'acquire_lock needs a non-empty key');
    END IF;
    IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
        PERFORM lane._fail('LN003', format('a lock''s ttl must be positive, got %s ms', p_ttl_ms));
    END IF;
    v_job := lane._owned_job(p_queue, p_id, p_token);
    v_until := v_now + p_ttl_ms * interval '1 millisecond';
    LOOP
        SELECT * INTO v_lock FROM lane.locks WHERE key = p_key FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO lane.locks (key, holder_key, holder_queue, holder_id, holder_token,
                                    acquired_at, expires_at)
            VALUES (p_key, v_job.key, p_queue, p_id, p_token, v_now, v_until)
            ON CONFLICT (key) DO NOTHING;
            IF FOUND THEN
                RETURN true;
            END IF;
            CONTINUE;  -- inserted by another caller meanwhile: lock that row and look
        END IF;
        IF v_lock.holder_key = v_job.key AND v_lock.holder_token = p_token THEN
            UPDATE lane.locks SET expires_at = v_until WHERE key = p_key;
            RETURN true;
        END IF;
        IF v_lock.expires_at > v_now AND EXISTS (
               SELECT FROM lane.jobs j
                WHERE j.key = v_lock.holder_key AND j.state = 'active'
                  AND j.lock_token = v_lock.holder_token) THEN
            RETURN false;
        END IF;
        UPDATE lane.locks
           SET holder_key = v_job.key, holder_queue = p_queue, holder_id = p_id,
               holder_token = p_token, acquired_at = v_now, expires_at = v_until
         WHERE key = p_key;
        RETURN true;
    END LOOP;
END $$;

-- MW-3, MW-4: gives p_key up when the run (p_queue, p_id, p_token) holds it; false when it
-- held nothing (another run took the key after this one's expired, say).
CREATE OR REPLACE FUNCTION lane.release_lock(p_key text, p_queue text, p_id text, p_token uuid)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM lane.locks
     WHERE key = p_key AND holder_queue = p_queue AND holder_id = p_id
       AND holder_token = p_token;
    RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION lane._check_limiter(p_max integer, p_decay_ms bigint)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_max IS NULL OR p_max < 1 THEN
        PERFORM lane._fail('LN003', format(
            'a limiter needs max_attempts of at least 1, got %s', coalesce(p_max::text, 'NULL')));
    END IF;
    IF p_decay_ms IS NULL OR p_decay_ms < 1 THEN
        PERFORM lane._fail('LN003', format(
            'a limiter needs a decay of at least 1 ms, got %s ms',
            coalesce(p_decay_ms::text, 'NULL')));
    END IF;
END $$;

-- MW-5: one hit on the fixed window of p_key (p_max hits per p_decay_ms, the window
-- starting at its first hit). Returns NULL when the hit is granted, else the milliseconds
-- until the window ends. Checked and counted in one statement; a refused hit is counted
-- too, capped at p_max + 1, which is what tells it apart from the last granted one.
CREATE OR REPLACE FUNCTION lane.hit_rate_limit(p_key text, p_max integer, p_decay_ms bigint,
                                               p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_decay interval := p_decay_ms * interval '1 millisecond';
    v_hits integer;
    v_start timestamptz;
BEGIN
    IF p_key IS NULL OR p_key = '' THEN
        PERFORM lane._fail('LN000', 'hit_rate_limit needs a non-empty key');
    END IF;
    PERFORM lane._check_limiter(p_max, p_decay_ms);
    INSERT INTO lane.limiters AS l (key, window_start, hits, updated_at)
    VALUES (p_key, v_now, 1, v_now)
    ON CONFLICT (key) DO UPDATE
       SET window_start = CASE WHEN l.window_start IS NULL OR l.window_start + v_decay <= v_now
                               THEN v_now ELSE l.window_start END,
           hits = CASE WHEN l.window_start IS NULL OR l.window_start + v_decay <= v_now THEN 1
                       ELSE least(l.hits + 1, p_max + 1) END,
           updated_at = v_now
    RETURNING l.hits, l.window_start INTO v_hits, v_start;
    IF v_hits <= p_max THEN
        RETURN NULL;
    END IF;
    RETURN greatest(ceil(extract(epoch FROM (v_start + v_decay - v_now)) * 1000)::bigint, 1);
END $$;

-- MW-6: the milliseconds p_key's throttle stays open (jobs are released without running),
-- or NULL when it is closed.
CREATE OR REPLACE FUNCTION lane.check_throttle(p_key text, p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT greatest(ceil(extract(epoch FROM (l.blocked_until
                                             - coalesce(p_now, clock_timestamp()))) * 1000)::bigint, 1)
      FROM lane.limiters l
     WHERE l.key = p_key AND l.blocked_until > coalesce(p_now, clock_timestamp());
$$;

-- MW-6: one handler outcome under p_key's throttle. A success resets the count of
-- consecutive failures; a failure adds one, and the p_max-th in a row opens the throttle
-- until p_now + p_decay_ms (the count starts again from 0). True when this outcome opened it.
CREATE OR REPLACE FUNCTION lane.record_throttle_outcome(p_key text, p_failed boolean,
                                                        p_max integer, p_decay_ms bigint,
                                                        p_now timestamptz DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_opened boolean;
BEGIN
    IF p_key IS NULL OR p_key = '' THEN
        PERFORM lane._fail('LN000', 'record_throttle_outcome needs a non-empty key');
    END IF;
    PERFORM lane._check_limiter(p_max, p_decay_ms);
    IF NOT p_failed THEN
        UPDATE lane.limiters SET failures = 0, updated_at = v_now
         WHERE key = p_key AND failures > 0;
        RETURN false;
    END IF;
    INSERT INTO lane.limiters AS l (key, failures, blocked_until, updated_at)
    VALUES (p_key, CASE WHEN p_max <= 1 THEN 0 ELSE 1 END,
            CASE WHEN p_max <= 1 THEN v_now + p_decay_ms * interval '1 millisecond' END, v_now)
    ON CONFLICT (key) DO UPDATE
       SET failures = CASE WHEN l.failures + 1 >= p_max THEN 0 ELSE l.failures + 1 END,
           blocked_until = CASE WHEN l.failures + 1 >= p_max
                                THEN v_now + p_decay_ms * interval '1 millisecond'
                                ELSE l.blocked_until END,
           updated_at = v_now
    RETURNING l.failures = 0 INTO v_opened;
    RETURN v_opened;
END $$;
