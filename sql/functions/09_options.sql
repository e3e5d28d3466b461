-- lane_pg stored functions: Job options: the checks of an options document (ADD-8).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py). lane_pg/options.py is the Python twin.

-- Checks an options document before any write (ADD-8). lane_pg/options.py applies the same
-- rules in Python (tests/conformance/test_options_agree.py feeds both random documents);
-- change the two together. Keys are walked in jsonb order and the first bad one is
-- reported, by the checker lane._check_option gives its key. Bounds: durations (delay_ms,
-- timeout_ms, backoff delays, retention age_ms) at most lane._max_duration_ms(), so
-- `n * interval '1 millisecond'` fits; counts (attempts, retention count and limit) at most
-- lane._max_int(). A value beyond them used to be accepted here and then broke the job's
-- retry or completion ("interval out of range", "out of range for type bigint"); a backoff
-- object missing its delays was accepted as well (its NULL checks were not false) and
-- retried at once.
-- The walk is one statement calling the checker of each key present. Measured by the
-- backend's CPU time for 20,000 calls (medians of 11 rounds interleaved with the single
-- 183-line function this replaced): {"attempts", "priority"} 16.3 -> 16.1 us, ten keys
-- 75.2 -> 71.8, a deduplication document 35.1 -> 33.4 (in earlier runs -4 to -9 %, -1 to
-- +3 %, -11 to -12 %). Slower forms, same run: a FOR loop with a PERFORM per key,
-- 22.2 / 100.0 / 38.3 us (each PERFORM starts an executor); the simple checkers as
-- inlined sql, 21.8 / 75.5 / 45.2 (the statement compiles all it inlines on every start).
CREATE OR REPLACE FUNCTION lane._check_options(p_options jsonb)
RETURNS void LANGUAGE plpgsql STABLE AS $$  -- STABLE: lane._check_repeat reads the zone list
BEGIN
    IF jsonb_typeof(p_options) <> 'object' THEN
        PERFORM lane._fail('LN003', format('options must be a JSON object, got %s', p_options));
    END IF;
    -- A JSON null means "not given", as an absent key does.
    PERFORM lane._check_option(o.key, o.value)
       FROM jsonb_each(p_options) o WHERE jsonb_typeof(o.value) <> 'null';
    -- FLOW-5..9: a flow child takes one policy for its terminal failure.
    IF p_options ?| ARRAY['fail_parent_on_failure', 'ignore_dependency_on_failure',
                          'remove_dependency_on_failure', 'continue_parent_on_failure'] THEN
        IF (SELECT count(*) FROM unnest(ARRAY['fail_parent_on_failure',
                                              'ignore_dependency_on_failure',
                                              'remove_dependency_on_failure',
                                              'continue_parent_on_failure']) f
             WHERE p_options -> f = 'true'::jsonb) > 1 THEN
            PERFORM lane._fail('LN003',
                'a flow child takes at most one of fail_parent_on_failure, '
                'ignore_dependency_on_failure, remove_dependency_on_failure and '
                'continue_parent_on_failure');
        END IF;
    END IF;
    -- A series schedules its occurrences and names each (lane._repeat_take): no delay and
    -- no custom id of the caller's.
    IF jsonb_typeof(p_options -> 'repeat') = 'object'
       AND (coalesce(jsonb_typeof(p_options -> 'job_id'), 'null') <> 'null'
            OR coalesce(p_options -> 'delay_ms', '0'::jsonb) NOT IN ('0'::jsonb, 'null'::jsonb)) THEN
        PERFORM lane._fail('LN003',
            'repeat does not take job_id or delay_ms: every occurrence gets its own id, due '
            'when its schedule says');
    END IF;
END $$;

-- The checkers lane._check_option calls, one per rule, each given a key's value (never a
-- JSON null) and raising the error that names it.

-- A custom job id (ADD-3, ADD-4): LN001.
CREATE OR REPLACE FUNCTION lane._check_option_job_id(p_value jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_id text;
BEGIN
    IF jsonb_typeof(p_value) <> 'string' THEN
        PERFORM lane._fail('LN001', format('job_id must be a string, got %s', p_value));
    END IF;
    v_id := p_value #>> '{}';
    IF v_id = '' OR length(v_id) > 255 THEN
        PERFORM lane._fail('LN001', format('invalid job id %L: use 1-255 characters', v_id));
    END IF;
    IF v_id = '0' OR v_id LIKE '0:%' OR v_id ~ '^[0-9]+$' THEN
        PERFORM lane._fail('LN001', format(
            'invalid job id %L: custom ids may not be 0, start with ''0:'' or be a '
            'pure integer (those are reserved for generated ids)', v_id));
    END IF;
END $$;

-- priority: LN002.
CREATE OR REPLACE FUNCTION lane._check_option_priority(p_value jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT lane._is_json_count(p_value, lane._max_priority()) THEN
        PERFORM lane._fail('LN002', format(
            'priority must be an integer between 0 and %s, got %s', lane._max_priority(),
            p_value));
    END IF;
END $$;

CREATE OR REPLACE FUNCTION lane._check_option_attempts(p_value jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT lane._is_json_count(p_value, lane._max_int()) OR p_value = '0'::jsonb THEN
        PERFORM lane._fail('LN003', format(
            'attempts must be an integer >= 1 (at most %s), got %s', lane._max_int(), p_value));
    END IF;
END $$;

-- delay_ms, timeout_ms.
CREATE OR REPLACE FUNCTION lane._check_option_duration(p_key text, p_value jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT lane._is_json_count(p_value, lane._max_duration_ms()) THEN
        PERFORM lane._fail('LN003', format(
            '%s must be a non-negative integer number of milliseconds (at most '
            '%s), got %s', p_key, lane._max_duration_ms(), p_value));
    END IF;
END $$;

-- RETRY-1: what lane._backoff_ms reads.
CREATE OR REPLACE FUNCTION lane._check_option_backoff(p_value jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT (CASE WHEN jsonb_typeof(p_value) <> 'object' THEN false
           ELSE CASE p_value ->> 'type'
           WHEN 'fixed' THEN lane._is_json_count(p_value -> 'delay_ms', lane._max_duration_ms())
           WHEN 'exponential' THEN
                lane._is_json_count(p_value -> 'base_ms', lane._max_duration_ms())
                AND (coalesce(jsonb_typeof(p_value -> 'cap_ms'), 'null') = 'null'
                     OR lane._is_json_count(p_value -> 'cap_ms', lane._max_duration_ms()))
                AND CASE WHEN NOT p_value ? 'jitter' THEN true
                         WHEN jsonb_typeof(p_value -> 'jitter') <> 'number' THEN false
                         ELSE (p_value ->> 'jitter')::numeric BETWEEN 0 AND 1 END
           WHEN 'sequence' THEN
                CASE WHEN jsonb_typeof(p_value -> 'delays_ms') IS DISTINCT FROM 'array'
                     THEN false
                     ELSE jsonb_array_length(p_value -> 'delays_ms') > 0
                          AND NOT EXISTS (
                              SELECT 1 FROM jsonb_array_elements(p_value -> 'delays_ms') d
                               WHERE NOT lane._is_json_count(d, lane._max_duration_ms())) END
           ELSE false END END)
    THEN
        PERFORM lane._fail('LN003', format(
            'invalid backoff %s: use {"type": "fixed", "delay_ms": n}, '
            '{"type": "exponential", "base_ms": n, "cap_ms": n, "jitter": 0..1} or '
            '{"type": "sequence", "delays_ms": [n, ...]} with n in 0..%s',
            p_value, lane._max_duration_ms()));
    END IF;
END $$;

-- remove_on_complete, remove_on_fail (RET-2..5): what lane._apply_retention reads.
CREATE OR REPLACE FUNCTION lane._check_option_retention(p_key text, p_value jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT (CASE jsonb_typeof(p_value)
           WHEN 'boolean' THEN true
           WHEN 'number' THEN lane._is_json_count(p_value, lane._max_int())
           WHEN 'object' THEN NOT EXISTS (
                SELECT 1 FROM jsonb_each(p_value) r
                 WHERE NOT CASE WHEN jsonb_typeof(r.value) = 'null'
                                     AND r.key IN ('age_ms', 'count', 'limit') THEN true
                                WHEN r.key = 'age_ms'
                                THEN lane._is_json_count(r.value, lane._max_duration_ms())
                                WHEN r.key IN ('count', 'limit')
                                THEN lane._is_json_count(r.value, lane._max_int())
                                ELSE false END)
           ELSE false END)
    THEN
        PERFORM lane._fail('LN003', format(
            '%s must be true, false, a count (0..%s), or '
            '{"age_ms", "count", "limit"}, got %s', p_key, lane._max_int(), p_value));
    END IF;
END $$;

-- DEDUP-1..9: lane._dedup_take reads it. kind 'unique' (UNIQ-1, UNIQ-15, migration 0018):
-- one lock per id in the connection, with a TTL, never replacing or keeping a duplicate
-- (those act on a queue's own owner).
CREATE OR REPLACE FUNCTION lane._check_option_deduplication(p_value jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT (CASE WHEN jsonb_typeof(p_value) <> 'object' THEN false
           ELSE NOT EXISTS (SELECT 1 FROM jsonb_object_keys(p_value) k
                             WHERE k NOT IN ('id', 'ttl_ms', 'extend_ttl',
                                             'replace_delayed', 'keep_last_if_active',
                                             'token', 'kind'))
                AND jsonb_typeof(p_value -> 'id') IS NOT DISTINCT FROM 'string'
                AND length(p_value ->> 'id') BETWEEN 1 AND 255
                AND (coalesce(jsonb_typeof(p_value -> 'token'), 'null') = 'null'
                     OR jsonb_typeof(p_value -> 'token') = 'string'
                        AND length(p_value ->> 'token') BETWEEN 1 AND 255)
                AND (coalesce(jsonb_typeof(p_value -> 'ttl_ms'), 'null') = 'null'
                     OR lane._is_json_count(p_value -> 'ttl_ms', lane._max_duration_ms())
                        AND p_value -> 'ttl_ms' <> '0'::jsonb)
                AND NOT EXISTS (
                    SELECT 1 FROM unnest(ARRAY['extend_ttl', 'replace_delayed',
                                               'keep_last_if_active']) f
                     WHERE coalesce(jsonb_typeof(p_value -> f), 'null')
                           NOT IN ('null', 'boolean'))
                AND NOT (p_value -> 'extend_ttl' IS NOT DISTINCT FROM 'true'::jsonb
                         AND coalesce(jsonb_typeof(p_value -> 'ttl_ms'), 'null') = 'null')
                AND coalesce(p_value -> 'kind', 'null'::jsonb)
                    IN ('null'::jsonb, '"dedup"'::jsonb, '"unique"'::jsonb)
                AND NOT (p_value -> 'kind' IS NOT DISTINCT FROM '"unique"'::jsonb
                         AND (coalesce(jsonb_typeof(p_value -> 'ttl_ms'), 'null') = 'null'
                              OR p_value -> 'replace_delayed'
                                 IS NOT DISTINCT FROM 'true'::jsonb
                              OR p_value -> 'keep_last_if_active'
                                 IS NOT DISTINCT FROM 'true'::jsonb))
           END)
    THEN
        PERFORM lane._fail('LN003', format(
            'invalid deduplication %s: use {"id": "1-255 characters", '
            '"ttl_ms": 1..%s, "extend_ttl": bool, "replace_delayed": bool, '
            '"keep_last_if_active": bool, "token": "1-255 characters", '
            '"kind": "dedup" | "unique"}; extend_ttl needs ttl_ms; kind "unique" '
            'needs ttl_ms and takes neither replace_delayed nor keep_last_if_active',
            p_value, lane._max_duration_ms()));
    END IF;
END $$;

-- lifo, fail_on_timeout and the four flow-failure flags.
CREATE OR REPLACE FUNCTION lane._check_option_boolean(p_key text, p_value jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(p_value) <> 'boolean' THEN
        PERFORM lane._fail('LN003', format('%s must be true or false, got %s', p_key, p_value));
    END IF;
END $$;

-- What a client stores beside the job and reads back, never interpreted here (the facade's
-- envelope: connection label, unique and debounce tokens, context).
CREATE OR REPLACE FUNCTION lane._check_option_meta(p_value jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(p_value) <> 'object' THEN
        PERFORM lane._fail('LN003', format('meta must be a JSON object, got %s', p_value));
    END IF;
END $$;

-- The checker of each option key (never given a JSON null): one arm per key
-- (tests/test_catalogues.py compares them with lane_pg.options.OPTION_KEYS). One
-- expression, LANGUAGE sql and VOLATILE like lane._fail, so that the planner inlines it
-- into lane._check_options' statement (EXPLAIN VERBOSE shows the CASE): a sql function
-- that is not inlined is planned again on every call. The checkers are plpgsql: those with
-- sub-selects could not be inlined either. Last in the file: the body of a sql function is
-- checked when it is created, so the checkers must exist (and 08_schedule.sql's).
CREATE OR REPLACE FUNCTION lane._check_option(p_key text, p_value jsonb)
RETURNS void LANGUAGE sql VOLATILE AS $$
    SELECT CASE
           WHEN p_key = 'job_id' THEN lane._check_option_job_id(p_value)
           WHEN p_key = 'priority' THEN lane._check_option_priority(p_value)
           WHEN p_key = 'attempts' THEN lane._check_option_attempts(p_value)
           WHEN p_key IN ('delay_ms', 'timeout_ms') THEN lane._check_option_duration(p_key, p_value)
           WHEN p_key = 'backoff' THEN lane._check_option_backoff(p_value)
           WHEN p_key IN ('remove_on_complete', 'remove_on_fail')
           THEN lane._check_option_retention(p_key, p_value)
           WHEN p_key = 'deduplication' THEN lane._check_option_deduplication(p_value)
           WHEN p_key = 'repeat' THEN lane._check_repeat(p_value)  -- REP-1, REP-5 (08_schedule)
           -- lifo; fail_on_timeout (RETRY-4 per job: the worker makes this job's timeout
           -- terminal); FLOW-5..9: what a flow child's terminal failure does to its parent.
           WHEN p_key IN ('lifo', 'fail_on_timeout', 'fail_parent_on_failure',
                          'ignore_dependency_on_failure', 'remove_dependency_on_failure',
                          'continue_parent_on_failure')
           THEN lane._check_option_boolean(p_key, p_value)
           WHEN p_key = 'meta' THEN lane._check_option_meta(p_value)
           ELSE lane._fail('LN003', format(
               'unknown option %L: known options are attempts, backoff, '
               'continue_parent_on_failure, deduplication, delay_ms, '
               'fail_on_timeout, fail_parent_on_failure, ignore_dependency_on_failure, '
               'job_id, lifo, meta, priority, remove_dependency_on_failure, '
               'remove_on_complete, remove_on_fail, repeat, timeout_ms', p_key))
           END
$$;
