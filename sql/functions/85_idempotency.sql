-- lane_pg stored functions: Idempotency keys (WORK-18), for handlers under at-least-once delivery.
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- A key is one lane.idempotency_keys row per (namespace, key), written in the caller's
-- transaction: taken with the handler's own writes, it commits or rolls back with them
-- (lane_pg.postgres.idempotency is the Python side: once, commit_on_success, remember). Whoever
-- commits the row first has run the block; everybody else sees it taken. Nothing here
-- touches the jobs: a key is independent of any job id, so the same key guards a side
-- effect across retries, re-adds and queues. A row whose expires_at has passed counts as
-- absent everywhere (take, read), so expiry never waits for the pruning sweep.

-- The rules of a key, its namespace and its TTL (LN003, nothing written). The limits keep
-- an index entry small (a key is an identifier, not a payload: hash a longer one), and a
-- TTL in the range every other millisecond option takes.
CREATE OR REPLACE FUNCTION lane._check_idempotency_key(p_namespace text, p_key text,
                                                       p_ttl_ms bigint)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_namespace IS NULL OR length(p_namespace) > 255 THEN
        PERFORM lane._fail('LN003', format(
            'invalid idempotency namespace %L: use 0-255 characters', p_namespace));
    END IF;
    IF p_key IS NULL OR length(p_key) NOT BETWEEN 1 AND 255 THEN
        PERFORM lane._fail('LN003', format(
            'invalid idempotency key %L: use 1-255 characters', p_key));
    END IF;
    IF p_ttl_ms IS NOT NULL AND p_ttl_ms NOT BETWEEN 1 AND lane._max_duration_ms() THEN
        PERFORM lane._fail('LN003', format(
            'idempotency ttl_ms must be between 1 and %s (or NULL: no expiry), got %s',
            lane._max_duration_ms(), p_ttl_ms));
    END IF;
END $$;

-- Takes (p_namespace, p_key) for the calling transaction: taken is true when this call
-- wrote the row (a new key, or one whose TTL ran out), false when a live row is there; its
-- result is then that row's recorded outcome (NULL when none was recorded). A concurrent
-- take of the same key waits for the taker's transaction (the primary key's uncommitted
-- entry) and then reads its outcome, so two takers never both win and a rolled-back take
-- leaves the key free. DO NOTHING, not DO UPDATE ... WHERE expired: DO UPDATE locks the
-- live row even when its WHERE is false, which would queue every later duplicate behind
-- the transaction of the one before it. Only an expired row is locked, to replace it.
CREATE OR REPLACE FUNCTION lane.take_idempotency_key(p_namespace text, p_key text,
                                                     p_ttl_ms bigint DEFAULT NULL,
                                                     p_now timestamptz DEFAULT NULL,
                                                     OUT taken boolean, OUT result jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_expires_at timestamptz := v_now + p_ttl_ms * interval '1 millisecond';
    v_held_until timestamptz;
BEGIN
    PERFORM lane._check_idempotency_key(p_namespace, p_key, p_ttl_ms);
    LOOP
        INSERT INTO lane.idempotency_keys (namespace, key, result, created_at, expires_at)
        VALUES (p_namespace, p_key, NULL, v_now, v_expires_at)
        ON CONFLICT (namespace, key) DO NOTHING
        RETURNING true INTO taken;
        IF taken THEN
            RETURN;
        END IF;
        -- A new statement, so READ COMMITTED sees the row the conflict waited for.
        SELECT k.result, k.expires_at INTO result, v_held_until FROM lane.idempotency_keys k
         WHERE k.namespace = p_namespace AND k.key = p_key;
        IF FOUND AND (v_held_until IS NULL OR v_held_until > v_now) THEN
            taken := false;
            RETURN;
        END IF;
        IF FOUND THEN
            UPDATE lane.idempotency_keys k
               SET result = NULL, created_at = v_now, expires_at = v_expires_at
             WHERE k.namespace = p_namespace AND k.key = p_key AND k.expires_at <= v_now
            RETURNING true INTO taken;
            IF taken THEN
                result := NULL;
                RETURN;
            END IF;
        END IF;
        -- Pruned, or replaced by a concurrent take, in between: look again.
    END LOOP;
END $$;

-- Stores the block's JSON outcome on a key this transaction took (remember). A key that is
-- not there, or whose TTL ran out, is a call out of order (LN000): record only after a take.
CREATE OR REPLACE FUNCTION lane.record_idempotency_result(p_namespace text, p_key text,
                                                          p_result jsonb,
                                                          p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    PERFORM lane._check_idempotency_key(p_namespace, p_key, NULL);
    IF p_result IS NULL THEN
        PERFORM lane._fail('LN003', 'an idempotency result must be a JSON value (JSON null is ''null'')');
    END IF;
    UPDATE lane.idempotency_keys k SET result = p_result
     WHERE k.namespace = p_namespace AND k.key = p_key
       AND (k.expires_at IS NULL OR k.expires_at > v_now);
    IF NOT FOUND THEN
        PERFORM lane._fail('LN000', format(
            'idempotency key %L of namespace %L is not taken: call lane.take_idempotency_key '
            'first, in the same transaction', p_key, p_namespace));
    END IF;
END $$;

-- The live row of a key (none when absent or expired), for inspection.
CREATE OR REPLACE FUNCTION lane.read_idempotency_key(p_namespace text, p_key text,
                                                     p_now timestamptz DEFAULT NULL)
RETURNS TABLE (result jsonb, created_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    PERFORM lane._check_idempotency_key(p_namespace, p_key, NULL);
    RETURN QUERY
        SELECT k.result, k.created_at, k.expires_at FROM lane.idempotency_keys k
         WHERE k.namespace = p_namespace AND k.key = p_key
           AND (k.expires_at IS NULL OR k.expires_at > v_now);
END $$;

-- Deletes at most p_limit rows whose TTL ran out (oldest expiry first) and returns how
-- many. Rows another transaction holds are skipped (a take is replacing them): the
-- maintenance caller never waits. One probe of idempotency_keys_expiry_idx when none is due.
CREATE OR REPLACE FUNCTION lane.prune_idempotency_keys(p_limit integer DEFAULT 1000,
                                                       p_now timestamptz DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_count integer;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        PERFORM lane._fail('LN003', format('limit must be at least 1, got %s', p_limit));
    END IF;
    DELETE FROM lane.idempotency_keys k
     WHERE (k.namespace, k.key) IN (
            SELECT e.namespace, e.key FROM lane.idempotency_keys e
             WHERE e.expires_at <= v_now
             ORDER BY e.expires_at
             LIMIT p_limit
               FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END $$;
