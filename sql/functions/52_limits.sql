-- lane_pg stored functions: Claim limits: rate limits and max active jobs (RATE, CLAIM-3/9/11).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- The rate limit is a sliding log (migration 0009, lane.claim_log): a claim under N per D
-- admits k jobs only while the log's jobs of the last D plus k stay within N, so no window
-- of length D, wherever it starts, holds more than N claimed jobs (a fixed window would
-- allow 2N across a boundary). Limited claims of one queue take its lane.queues row FOR
-- UPDATE and count under it, so they take turns; unlimited queues never take that lock
-- (DESIGN.md: -30 % with 4 workers on one queue if every claim did).

CREATE OR REPLACE FUNCTION lane._check_rate_limit(p_max integer, p_duration_ms bigint)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_max IS NULL OR p_max < 1 THEN
        PERFORM lane._fail('LN003', format(
            'a rate limit needs a max of at least 1 job, got %s', coalesce(p_max::text, 'NULL')));
    END IF;
    IF p_duration_ms IS NULL OR p_duration_ms < 1 OR p_duration_ms > lane._max_int() THEN
        PERFORM lane._fail('LN003', format(
            'a rate limit needs a duration of 1 to %s ms, got %s ms', lane._max_int(),
            coalesce(p_duration_ms::text, 'NULL')));
    END IF;
END $$;

-- Milliseconds until the log of p_queue admits one more job under p_max per window: 0 when
-- it admits one now. p_window_ms is the window (NULL: each row by the window it was
-- admitted under). The rows are walked newest expiry first; the row at which the jobs
-- reach p_max is the one whose expiry brings the count below p_max.
CREATE OR REPLACE FUNCTION lane._rate_wait_ms(p_queue text, p_max integer, p_window_ms integer,
                                              p_now timestamptz)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_expires timestamptz;
BEGIN
    SELECT l.expires INTO v_expires
      FROM (SELECT c.expires, sum(c.jobs) OVER (ORDER BY c.expires DESC
                                                ROWS UNBOUNDED PRECEDING) AS newer
              FROM (SELECT g.claimed_at + coalesce(p_window_ms, g.window_ms)
                                          * interval '1 millisecond' AS expires, g.jobs
                      FROM lane.claim_log g WHERE g.queue = p_queue) c
             WHERE c.expires > p_now) l
     WHERE l.newer >= p_max
     ORDER BY l.expires DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    RETURN greatest(1, ceil(extract(epoch FROM v_expires - p_now) * 1000))::bigint;
END $$;

-- The limited part of a claim (lane.claim_jobs calls it only for a queue with a rate
-- limit or max_active, or under a worker-local rate limit): locks the queue row, then says
-- how many of p_want jobs may be claimed, at what time, and under which rate window (NULL
-- when no rate limit applies). The time is read after the lock, so claim times of a queue
-- increase in lock order and every row a claim counts was committed before it. Active
-- jobs are counted from the rows (never a cached count): an uncommitted completion still
-- counts as active, so the count can only be high. A worker-local limit (p_local_max /
-- p_local_ms) wins over the queue's (RATE-3). Trims rows older than their window.
CREATE OR REPLACE FUNCTION lane._limited_claim(p_queue text, p_want integer,
                                               p_local_max integer, p_local_ms integer,
                                               p_now timestamptz,
                                               OUT o_allowed integer, OUT o_claimed_at timestamptz,
                                               OUT o_window_ms integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_rate_max integer;
    v_rate_ms integer;
    v_max_active integer;
    v_active integer;
    v_used bigint;
BEGIN
    SELECT q.rate_max, q.rate_duration_ms, q.max_active
      INTO v_rate_max, v_rate_ms, v_max_active
      FROM lane.queues q WHERE q.name = p_queue FOR UPDATE;
    o_allowed := p_want;
    IF v_max_active IS NOT NULL THEN
        -- jobs_lease_idx holds every active job of every queue; LIMIT bounds the walk.
        SELECT count(*) INTO v_active
          FROM (SELECT 1 FROM lane.jobs j WHERE j.state = 'active' AND j.queue = p_queue
                 LIMIT v_max_active) a;
        o_allowed := least(o_allowed, v_max_active - v_active);
    END IF;
    -- Read after the count's snapshot: a completion that count saw committed stamped its
    -- finished_at before committing, so a claim's processed_at never precedes the
    -- finished_at of the job whose slot it took (the clock read before the count could,
    -- when a completion started after it and committed before the count).
    o_claimed_at := coalesce(p_now, clock_timestamp());
    IF p_local_max IS NOT NULL THEN
        v_rate_max := p_local_max;
        v_rate_ms := p_local_ms;
    END IF;
    -- RATE-9: a maxed claim reads no rate capacity and writes no log row.
    IF o_allowed > 0 AND v_rate_max IS NOT NULL THEN
        o_window_ms := v_rate_ms;
        DELETE FROM lane.claim_log g
         WHERE g.queue = p_queue AND g.claimed_at <= o_claimed_at - v_rate_ms * interval '1 millisecond'
           AND g.claimed_at <= o_claimed_at - g.window_ms * interval '1 millisecond';
        SELECT coalesce(sum(g.jobs), 0) INTO v_used
          FROM lane.claim_log g
         WHERE g.queue = p_queue AND g.claimed_at > o_claimed_at - v_rate_ms * interval '1 millisecond';
        o_allowed := least(o_allowed, v_rate_max - v_used);
    END IF;
END $$;

-- CLAIM-9: called when a job of p_queue stopped being active while waiting work remains
-- (lane._drained_check, after a completion or a terminal failure) and when a run moves to
-- delayed (a retry with backoff, lane.delay_job): wakes the claimers max_active held back. A queue without
-- max_active sends nothing, so the plain finish path pays one primary-key probe.
CREATE OR REPLACE FUNCTION lane._wake_if_capped(p_queue text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM lane.queues WHERE name = p_queue AND max_active IS NOT NULL;
    IF FOUND THEN
        PERFORM lane._wake(p_queue);
    END IF;
END $$;

-- RATE-2: the queue's shared limit, used by every claim without a worker-local limit.
-- Wakes the queue's claimers: a higher limit may let them claim now.
CREATE OR REPLACE FUNCTION lane.set_claim_rate_limit(p_queue text, p_max integer,
                                                     p_duration_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._check_queue(p_queue);
    PERFORM lane._check_rate_limit(p_max, p_duration_ms);
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues SET rate_max = p_max, rate_duration_ms = p_duration_ms
     WHERE name = p_queue;
    PERFORM lane._wake(p_queue);
END $$;

-- No row when the queue has no shared limit (or does not exist).
CREATE OR REPLACE FUNCTION lane.get_claim_rate_limit(p_queue text)
RETURNS TABLE (max integer, duration_ms integer) LANGUAGE sql STABLE AS $$
    SELECT q.rate_max, q.rate_duration_ms FROM lane.queues q
     WHERE q.name = p_queue AND q.rate_max IS NOT NULL
$$;

-- The log rows stay (clear_claim_rate_limit_key deletes them); no later claim counts
-- them unless a limit applies again.
CREATE OR REPLACE FUNCTION lane.clear_claim_rate_limit(p_queue text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._check_queue(p_queue);
    UPDATE lane.queues SET rate_max = NULL, rate_duration_ms = NULL
     WHERE name = p_queue AND rate_max IS NOT NULL;
    IF FOUND THEN
        PERFORM lane._wake(p_queue);
    END IF;
END $$;

-- RATE-5. With a max (p_max, else the queue's shared rate_max): 0 while a claim of one job
-- would be admitted, else the milliseconds until one is (the manual block of
-- rate_limit_claims_for included), windows by the shared duration when set, else by each
-- log row's own. Without any max: the raw time-to-live of the limiter, the milliseconds
-- until its last log row (or the manual block) expires, and -2 when it holds nothing
-- live (Redis PTTL of a missing key).
CREATE OR REPLACE FUNCTION lane.get_claim_rate_limit_ttl(p_queue text, p_max integer DEFAULT NULL,
                                                         p_now timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_rate_max integer;
    v_rate_ms integer;
    v_blocked_until timestamptz;
    v_block_ms bigint;
    v_last timestamptz;
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF p_max IS NOT NULL AND p_max < 1 THEN
        PERFORM lane._fail('LN003', format('max must be at least 1, got %s', p_max));
    END IF;
    SELECT q.rate_max, q.rate_duration_ms, q.rate_blocked_until
      INTO v_rate_max, v_rate_ms, v_blocked_until
      FROM lane.queues q WHERE q.name = p_queue;
    v_block_ms := CASE WHEN v_blocked_until > v_now
                       THEN ceil(extract(epoch FROM v_blocked_until - v_now) * 1000)::bigint END;
    IF coalesce(p_max, v_rate_max) IS NOT NULL THEN
        RETURN greatest(coalesce(v_block_ms, 0),
                        lane._rate_wait_ms(p_queue, coalesce(p_max, v_rate_max), v_rate_ms, v_now));
    END IF;
    SELECT max(g.claimed_at + g.window_ms * interval '1 millisecond') INTO v_last
      FROM lane.claim_log g WHERE g.queue = p_queue;
    IF v_last > v_now THEN
        v_block_ms := greatest(v_block_ms, ceil(extract(epoch FROM v_last - v_now) * 1000)::bigint);
    END IF;
    RETURN coalesce(v_block_ms, -2);
END $$;

-- RATE-6 (BullMQ rateLimit()): no claim of the queue takes a job until now + p_duration_ms,
-- whatever its limits; a later call replaces the time.
CREATE OR REPLACE FUNCTION lane.rate_limit_claims_for(p_queue text, p_duration_ms bigint,
                                                      p_now timestamptz DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF p_duration_ms IS NULL OR p_duration_ms < 1 OR p_duration_ms > lane._max_duration_ms() THEN
        PERFORM lane._fail('LN003', format(
            'the duration must be 1 to %s ms, got %s ms', lane._max_duration_ms(),
            coalesce(p_duration_ms::text, 'NULL')));
    END IF;
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues
       SET rate_blocked_until = coalesce(p_now, clock_timestamp())
                                + p_duration_ms * interval '1 millisecond'
     WHERE name = p_queue;
END $$;

-- RATE-6: forgets the claims counted so far and any manual block; the limit stays.
CREATE OR REPLACE FUNCTION lane.clear_claim_rate_limit_key(p_queue text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._check_queue(p_queue);
    DELETE FROM lane.claim_log WHERE queue = p_queue;
    UPDATE lane.queues SET rate_blocked_until = NULL
     WHERE name = p_queue AND rate_blocked_until IS NOT NULL;
    PERFORM lane._wake(p_queue);
END $$;

-- RATE-7: at most p_max jobs of the queue active at once, over every worker.
CREATE OR REPLACE FUNCTION lane.set_max_active_jobs(p_queue text, p_max integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._check_queue(p_queue);
    IF p_max IS NULL OR p_max < 1 THEN
        PERFORM lane._fail('LN003', format(
            'max active jobs must be at least 1, got %s', coalesce(p_max::text, 'NULL')));
    END IF;
    PERFORM lane._ensure_queue(p_queue);
    UPDATE lane.queues SET max_active = p_max WHERE name = p_queue;
    PERFORM lane._wake(p_queue);
END $$;

CREATE OR REPLACE FUNCTION lane.get_max_active_jobs(p_queue text)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT max_active FROM lane.queues WHERE name = p_queue
$$;

CREATE OR REPLACE FUNCTION lane.clear_max_active_jobs(p_queue text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lane._check_queue(p_queue);
    UPDATE lane.queues SET max_active = NULL WHERE name = p_queue AND max_active IS NOT NULL;
    IF FOUND THEN
        PERFORM lane._wake(p_queue);
    END IF;
END $$;

-- RATE-8: one read; false without max_active.
CREATE OR REPLACE FUNCTION lane.is_maxed(p_queue text)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce((
        SELECT (SELECT count(*) FROM (SELECT 1 FROM lane.jobs j
                                       WHERE j.state = 'active' AND j.queue = q.name
                                       LIMIT q.max_active) a) >= q.max_active
          FROM lane.queues q WHERE q.name = p_queue AND q.max_active IS NOT NULL), false)
$$;

-- CLAIM-7/11: milliseconds until a claim of these queues (all when NULL) may find work it
-- cannot take now: the next delayed job's due time (lane.next_due_in_ms; left out when
-- p_delayed is false), or the time a rate-limited queue with waiting jobs admits a claim
-- again (p_rate_max / p_rate_duration_ms the worker-local limit, which wins as in the
-- claim): 0 when it admits one already, since the window may have freed between the
-- caller's claim and this call. NULL when neither applies: a paused or maxed queue waits
-- for its resume or a freed slot, which NOTIFY.
CREATE OR REPLACE FUNCTION lane.next_claim_in_ms(p_queues text[] DEFAULT NULL,
                                                 p_rate_max integer DEFAULT NULL,
                                                 p_rate_duration_ms integer DEFAULT NULL,
                                                 p_delayed boolean DEFAULT true)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_wait bigint;
    v_ms bigint;
    v_row record;
BEGIN
    IF p_delayed THEN
        -- lane.next_due_in_ms's query, inlined: a LANGUAGE sql function called from
        -- plpgsql is planned on every call (~100 us of this function's ~350 us, measured).
        SELECT CASE WHEN min(j.available_at) IS NOT NULL THEN greatest(0, ceil(
                   extract(epoch FROM min(j.available_at) - v_now) * 1000))::bigint END
          INTO v_wait
          FROM lane.jobs j
         WHERE j.state = 'delayed' AND (p_queues IS NULL OR j.queue = ANY (p_queues));
    END IF;
    FOR v_row IN
        SELECT q.name, coalesce(p_rate_max, q.rate_max) AS rate_max,
               CASE WHEN p_rate_max IS NOT NULL THEN p_rate_duration_ms
                    ELSE q.rate_duration_ms END AS rate_ms,
               q.rate_blocked_until, q.max_active
          FROM lane.queues q
         WHERE (p_queues IS NULL OR q.name = ANY (p_queues)) AND NOT (q.paused OR q.paused_all)
           AND (q.rate_max IS NOT NULL OR q.rate_blocked_until > v_now OR p_rate_max IS NOT NULL)
    LOOP
        PERFORM 1 FROM lane.jobs WHERE queue = v_row.name AND state = 'waiting'
         ORDER BY order_key, key LIMIT 1;
        CONTINUE WHEN NOT FOUND;
        v_ms := CASE WHEN v_row.rate_blocked_until > v_now
                     THEN ceil(extract(epoch FROM v_row.rate_blocked_until - v_now) * 1000)::bigint
                     ELSE 0 END;
        IF v_row.rate_max IS NOT NULL THEN
            v_ms := greatest(v_ms, lane._rate_wait_ms(v_row.name, v_row.rate_max, v_row.rate_ms,
                                                      v_now));
        END IF;
        IF v_ms = 0 AND v_row.max_active IS NOT NULL THEN
            -- Admitted by the limiter but maxed: the finish that frees a slot wakes us.
            CONTINUE WHEN (SELECT count(*) FROM (SELECT 1 FROM lane.jobs j
                                                  WHERE j.state = 'active'
                                                    AND j.queue = v_row.name
                                                  LIMIT v_row.max_active) a)
                          >= v_row.max_active;
        END IF;
        v_wait := least(v_wait, v_ms);
    END LOOP;
    RETURN v_wait;
END $$;
