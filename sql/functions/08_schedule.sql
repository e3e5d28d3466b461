-- The schedule of repeatable jobs (REP-1, REP-5, A11): the repeat options document, cron
-- patterns, and the next occurrence of a series. lane_pg/types/schedule.py applies the same rules
-- in Python (tests/postgres/test_schedule_agree.py feeds both random documents, patterns
-- and instants); change the two together.
--
-- The repeat document (a job's options under "repeat"; a JSON null means "not given"):
--   {"every_ms": 1..lane._max_duration_ms()} or {"pattern": "<cron>"} (exactly one), and
--   optionally "tz": a tz database zone name as pg_timezone_names spells it, without its
--   posix/ copies, posixrules and localtime (pattern only: an interval is time-zone free, so
--   tz with every_ms is refused), "limit": 1..lane._max_int() total executions including the
--   first (counted by the caller), "end_at": epoch milliseconds 0..253402300799999 like the
--   other *_ms options (no occurrence after it; refusing an end_at already past at add needs
--   the add's clock and is the caller's), "key": the series key, 1-255 characters.
--
-- Cron patterns: 5 fields `min hour dom mon dow` (second 0), 6 fields `sec min hour dom mon
-- dow`, or the seed's 7 fields `sec min hour dom mon dow year` whose year must be `*`.
-- Fields are separated by spaces or tabs. Each field is a comma list of `*`, `n`, `a-b`
-- (a <= b), each optionally `/step` (1..the field's span), where `n/step` runs to the field's
-- last value; month names JAN-DEC and weekday names SUN-SAT in any case; weekday 0 and 7 are
-- Sunday (`n/step` on weekdays runs to 6, as croniter does); `?` alone means `*` in the
-- day-of-month or day-of-week field. Refused: L, W, #, H, @yearly and other extensions.
-- Day rule (croniter's, and Vixie cron's for plain lists): when both day fields are
-- restricted (neither is exactly `*` or `?`), a day matches if either matches; otherwise
-- both must. Unlike Vixie cron, `*/2` counts as restricted. A pattern whose day of month
-- exists in none of its months (`0 0 30 2 *`) is refused: it could never run.

-- The smallest value of the sorted p_values that is >= p_from, NULL when there is none.
-- A plpgsql loop: a subquery over unnest would take the executor path on every call.
CREATE OR REPLACE FUNCTION lane._cron_ceil(p_values integer[], p_from integer)
RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_value integer;
BEGIN
    FOREACH v_value IN ARRAY p_values LOOP
        IF v_value >= p_from THEN
            RETURN v_value;
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

-- One cron field as the sorted distinct values it allows. p_star_high is where `*` and
-- `n/step` stop (6 for weekdays, whose 7 is only an alias of Sunday 0).
CREATE OR REPLACE FUNCTION lane._cron_field(p_pattern text, p_field text, p_text text,
                                            p_low integer, p_high integer,
                                            p_star_high integer, p_names text[])
RETURNS integer[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_item text;
    v_parts text[];
    v_bounds integer[];
    v_token text;
    v_position integer;
    v_step integer;
    v_from integer;
    v_to integer;
    v_values integer[] := '{}';
BEGIN
    FOREACH v_item IN ARRAY string_to_array(p_text, ',') LOOP
        v_parts := regexp_match(v_item,
            '^(?:(\*)|([0-9]+|[A-Za-z]+)(?:-([0-9]+|[A-Za-z]+))?)(?:/([0-9]+))?$');
        IF v_parts IS NULL THEN
            PERFORM lane._fail('LN003', format(
                'invalid cron pattern %L: %s field: %L is not *, a value, a range a-b, or one '
                'of those with /step (L, W, #, H and ? inside a list are not supported)',
                p_pattern, p_field, v_item));
        END IF;
        v_bounds := '{}';
        FOREACH v_token IN ARRAY ARRAY[v_parts[2], v_parts[3]] LOOP
            CONTINUE WHEN v_token IS NULL;
            IF v_token ~ '^[0-9]+$' THEN
                IF v_token::numeric NOT BETWEEN p_low AND p_high THEN
                    PERFORM lane._fail('LN003', format(
                        'invalid cron pattern %L: %s field: %s is out of range %s-%s',
                        p_pattern, p_field, v_token, p_low, p_high));
                END IF;
                v_bounds := v_bounds || v_token::integer;
            ELSE
                v_position := array_position(p_names, upper(v_token));
                IF v_position IS NULL THEN
                    PERFORM lane._fail('LN003', format(
                        'invalid cron pattern %L: %s field: unknown name %L%s',
                        p_pattern, p_field, v_token,
                        CASE WHEN p_names IS NULL THEN ' (this field takes numbers only)'
                             ELSE format(' (use %s)', array_to_string(p_names, ' ')) END));
                END IF;
                v_bounds := v_bounds || (p_low + v_position - 1);
            END IF;
        END LOOP;
        v_step := 1;
        IF v_parts[4] IS NOT NULL THEN
            IF v_parts[4]::numeric NOT BETWEEN 1 AND p_star_high - p_low + 1 THEN
                PERFORM lane._fail('LN003', format(
                    'invalid cron pattern %L: %s field: step %s must be between 1 and %s',
                    p_pattern, p_field, v_parts[4], p_star_high - p_low + 1));
            END IF;
            v_step := v_parts[4]::integer;
        END IF;
        IF v_parts[1] IS NOT NULL THEN
            v_from := p_low;
            v_to := p_star_high;
        ELSIF cardinality(v_bounds) = 2 THEN
            v_from := v_bounds[1];
            v_to := v_bounds[2];
            IF v_from > v_to THEN
                PERFORM lane._fail('LN003', format(
                    'invalid cron pattern %L: %s field: range %L runs backwards (write a-b '
                    'with a <= b, or a list)', p_pattern, p_field, v_item));
            END IF;
        ELSE
            v_from := v_bounds[1];
            v_to := CASE WHEN v_parts[4] IS NULL THEN v_from
                         ELSE greatest(v_from, p_star_high) END;
        END IF;
        v_values := v_values || ARRAY(SELECT generate_series(v_from, v_to, v_step));
    END LOOP;
    RETURN ARRAY(SELECT DISTINCT v FROM unnest(v_values) v ORDER BY v);
END $$;

-- A cron pattern as the values each field allows (weekdays 0-6, Sunday 0), and whether
-- each day field is unrestricted (exactly `*` or `?`) for the day rule. LN003 when invalid.
CREATE OR REPLACE FUNCTION lane._cron_parse(
    p_pattern text,
    OUT seconds integer[], OUT minutes integer[], OUT hours integer[],
    OUT days integer[], OUT months integer[], OUT weekdays integer[],
    OUT any_day boolean, OUT any_weekday boolean)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_fields text[];
    v_count integer;
    v_names text[] := ARRAY['second', 'minute', 'hour', 'day-of-month', 'month',
                            'day-of-week'];
    v_index integer;
BEGIN
    IF p_pattern IS NULL THEN
        PERFORM lane._fail('LN003', 'cron pattern must be a string, got NULL');
    END IF;
    v_fields := regexp_split_to_array(btrim(p_pattern, E' \t'), E'[ \t]+');
    v_count := cardinality(v_fields);
    IF v_count = 5 THEN
        v_fields := '0'::text || v_fields;
    ELSIF v_count = 7 THEN
        IF v_fields[7] <> '*' THEN
            PERFORM lane._fail('LN003', format(
                'invalid cron pattern %L: the year field (7th) must be *, got %L',
                p_pattern, v_fields[7]));
        END IF;
    ELSIF v_count <> 6 THEN
        PERFORM lane._fail('LN003', format(
            'invalid cron pattern %L: use 5 fields (minute hour day-of-month month '
            'day-of-week), 6 (second first) or 7 (second first, year * last), got %s',
            p_pattern, v_count));
    END IF;
    FOR v_index IN 1..6 LOOP
        IF position('?' IN v_fields[v_index]) > 0
           AND NOT (v_index IN (4, 6) AND v_fields[v_index] = '?') THEN
            PERFORM lane._fail('LN003', format(
                'invalid cron pattern %L: %s field: %L (? may only stand alone, for the '
                'day-of-month or day-of-week field)',
                p_pattern, v_names[v_index], v_fields[v_index]));
        END IF;
    END LOOP;
    any_day := v_fields[4] IN ('*', '?');
    any_weekday := v_fields[6] IN ('*', '?');
    seconds := lane._cron_field(p_pattern, 'second', v_fields[1], 0, 59, 59, NULL);
    minutes := lane._cron_field(p_pattern, 'minute', v_fields[2], 0, 59, 59, NULL);
    hours := lane._cron_field(p_pattern, 'hour', v_fields[3], 0, 23, 23, NULL);
    days := lane._cron_field(p_pattern, 'day-of-month', replace(v_fields[4], '?', '*'),
                             1, 31, 31, NULL);
    months := lane._cron_field(p_pattern, 'month', v_fields[5], 1, 12, 12,
        ARRAY['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV',
              'DEC']);
    weekdays := lane._cron_field(p_pattern, 'day-of-week', replace(v_fields[6], '?', '*'),
                                 0, 7, 6, ARRAY['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT']);
    weekdays := ARRAY(SELECT DISTINCT w % 7 FROM unnest(weekdays) w ORDER BY 1);
    -- Only the day of month decides (weekday `*`): it must exist in one of the months.
    IF NOT any_day AND any_weekday
       AND NOT EXISTS (SELECT 1 FROM unnest(months) m
                        WHERE days[1] <= CASE WHEN m = 2 THEN 29
                                              WHEN m IN (4, 6, 9, 11) THEN 30 ELSE 31 END) THEN
        PERFORM lane._fail('LN003', format(
            'invalid cron pattern %L never matches: no day %s in month(s) %s',
            p_pattern, array_to_string(days, ','), array_to_string(months, ',')));
    END IF;
END $$;

-- The first whole second in (p_before, p_at] whose UTC offset (in the session's TimeZone)
-- is that of p_at, for p_before and p_at on either side of one offset change: the instant
-- the zone switched. A bisection, ~12 steps for an hour.
CREATE OR REPLACE FUNCTION lane._tz_switch(p_before timestamptz, p_at timestamptz)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_offset numeric := extract(timezone FROM p_at);
    v_low numeric := floor(extract(epoch FROM p_before));
    v_high numeric := ceil(extract(epoch FROM p_at));
    v_middle numeric;
BEGIN
    WHILE v_high - v_low > 1 LOOP
        v_middle := div(v_low + v_high, 2);
        IF extract(timezone FROM to_timestamp(v_middle::double precision)) = v_offset THEN
            v_high := v_middle;
        ELSE
            v_low := v_middle;
        END IF;
    END LOOP;
    RETURN to_timestamp(v_high::double precision);
END $$;

-- The first instant strictly after p_after whose wall-clock time in zone p_tz (UTC when
-- NULL) matches p_pattern; NULL when there is none by the end of local year
-- year(p_after) + 8, or after 9999-12-31 UTC (the last instant Python can hold). No pattern
-- lane._check_repeat accepts reaches the bound: the sparsest, Feb 29, recurs within 8 years
-- (2096 -> 2104), and a restricted weekday matches every month.
--
-- Daylight saving time: a wall-clock time the zone skips (spring forward) does not run
-- that day; one the zone repeats (fall back) runs once, at its first occurrence. An instant
-- matches only if it is the earliest instant showing its wall-clock time, so the second
-- pass of a repeated hour matches nothing: an every-minute pattern has no run during it
-- (Europe/Berlin 2026-10-25: 02:00-02:59 CEST run, 02:00-02:59 CET do not, 03:00 CET does).
--
-- The search walks local wall-clock fields, jumping to the next allowed month, hour, minute
-- or second and stepping only days one by one; a candidate in a gap jumps to the gap's end,
-- and one whose first occurrence is not after p_after (p_after in a second pass) to the end
-- of that pass, each found by lane._tz_switch. Measured on PostgreSQL 15 here (mean of
-- 200-500 calls in one session, ~0.06 ms of each the parse): '0 0 2 * * * *' UTC 0.13 ms;
-- '*/5 * * * *' Europe/Berlin 0.11 ms; '0 0 1 * 1' 0.07 ms; '0 0 0 29 2 *' from
-- 2096-03-01 to 2104-02-29 (~250 day steps) 0.28-0.37 ms; '* * * * * *' Europe/Berlin
-- from just before the gap or the repeated hour 0.10 ms (19 and 16 ms when those were
-- stepped through second by second).
--
-- The zone is applied by setting TimeZone for the call (restored on exit by the SET
-- clause), not with AT TIME ZONE: AT TIME ZONE reads a name that is also an abbreviation
-- (CET, EET, MET, WET) as the fixed abbreviation, without the zone's summer time.
-- PostgreSQL turns a skipped local time into an instant with the offset before the jump
-- and a repeated one into the later instant; the round trip below detects the first, and
-- the offset a day earlier (PostgreSQL's own assumption: transitions are over 48 h apart)
-- finds the earlier instant of the second. p_tz is not checked against the zone list here
-- (lane._check_repeat does that).
CREATE OR REPLACE FUNCTION lane._cron_next(p_pattern text, p_tz text, p_after timestamptz)
RETURNS timestamptz LANGUAGE plpgsql STABLE SET TimeZone = 'UTC' AS $$
DECLARE
    c record;
    v_year integer;
    v_month integer;
    v_day integer;
    v_hour integer;
    v_minute integer;
    v_second integer;
    v_last_year integer;
    v_next integer;
    v_y integer;
    v_weekday integer;
    v_day_ok boolean;
    v_local timestamp;
    v_instant timestamptz;
    v_later timestamptz;
    v_shift numeric;
    v_jump timestamp;
BEGIN
    c := lane._cron_parse(p_pattern);
    IF p_after IS NULL OR NOT isfinite(p_after) THEN
        RETURN NULL;
    END IF;
    IF p_tz IS NOT NULL THEN
        BEGIN
            PERFORM set_config('TimeZone', p_tz, true);
        EXCEPTION WHEN invalid_parameter_value THEN
            PERFORM lane._fail('LN003', format('unknown time zone %L', p_tz));
        END;
    END IF;
    v_local := date_trunc('second', p_after::timestamp) + interval '1 second';
    v_last_year := extract(year FROM p_after::timestamp)::integer + 8;
    v_year := extract(year FROM v_local);
    v_month := extract(month FROM v_local);
    v_day := extract(day FROM v_local);
    v_hour := extract(hour FROM v_local);
    v_minute := extract(minute FROM v_local);
    v_second := floor(extract(second FROM v_local));
    LOOP
        -- Carry overflowing fields upwards.
        IF v_second > 59 THEN v_second := 0; v_minute := v_minute + 1; END IF;
        IF v_minute > 59 THEN v_minute := 0; v_hour := v_hour + 1; END IF;
        IF v_hour > 23 THEN v_hour := 0; v_day := v_day + 1; END IF;
        IF v_day > (CASE WHEN v_month = 2 THEN
                             CASE WHEN v_year % 4 = 0 AND (v_year % 100 <> 0 OR v_year % 400 = 0)
                                  THEN 29 ELSE 28 END
                         WHEN v_month IN (4, 6, 9, 11) THEN 30 ELSE 31 END) THEN
            v_day := 1; v_month := v_month + 1;
        END IF;
        IF v_month > 12 THEN v_month := 1; v_year := v_year + 1; END IF;
        IF v_year > v_last_year THEN
            RETURN NULL;
        END IF;

        v_next := lane._cron_ceil(c.months, v_month);
        IF v_next IS NULL THEN
            v_year := v_year + 1; v_month := 1; v_day := 1;
            v_hour := 0; v_minute := 0; v_second := 0;
            CONTINUE;
        ELSIF v_next > v_month THEN
            v_month := v_next; v_day := 1; v_hour := 0; v_minute := 0; v_second := 0;
        END IF;

        IF NOT (c.any_day AND c.any_weekday) THEN
            -- Sakamoto's weekday (0 = Sunday), cheaper than building a date.
            v_y := v_year - CASE WHEN v_month < 3 THEN 1 ELSE 0 END;
            v_weekday := (v_y + v_y / 4 - v_y / 100 + v_y / 400
                          + (ARRAY[0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4])[v_month] + v_day) % 7;
            v_day_ok := CASE WHEN c.any_weekday THEN v_day = ANY (c.days)
                             WHEN c.any_day THEN v_weekday = ANY (c.weekdays)
                             ELSE v_day = ANY (c.days) OR v_weekday = ANY (c.weekdays) END;
            IF NOT v_day_ok THEN
                v_day := v_day + 1; v_hour := 0; v_minute := 0; v_second := 0;
                CONTINUE;
            END IF;
        END IF;

        v_next := lane._cron_ceil(c.hours, v_hour);
        IF v_next IS NULL THEN
            v_day := v_day + 1; v_hour := 0; v_minute := 0; v_second := 0;
            CONTINUE;
        ELSIF v_next > v_hour THEN
            v_hour := v_next; v_minute := 0; v_second := 0;
        END IF;

        v_next := lane._cron_ceil(c.minutes, v_minute);
        IF v_next IS NULL THEN
            v_hour := v_hour + 1; v_minute := 0; v_second := 0;
            CONTINUE;
        ELSIF v_next > v_minute THEN
            v_minute := v_next; v_second := 0;
        END IF;

        v_next := lane._cron_ceil(c.seconds, v_second);
        IF v_next IS NULL THEN
            v_minute := v_minute + 1; v_second := 0;
            CONTINUE;
        END IF;
        v_second := v_next;

        v_local := make_timestamp(v_year, v_month, v_day, v_hour, v_minute, v_second);
        v_instant := v_local::timestamptz;
        v_later := v_instant;
        v_shift := extract(timezone FROM v_instant - interval '24 hours')
                   - extract(timezone FROM v_instant);
        IF v_instant::timestamp <> v_local THEN
            -- Skipped by the zone: no run; go on from the end of the gap (v_instant, read
            -- with the offset before the jump, is past the switch; -v_shift is the gap).
            v_jump := lane._tz_switch(v_instant + v_shift * interval '1 second', v_instant)
                      ::timestamp;
        ELSE
            IF v_shift > 0
               AND (v_instant - v_shift * interval '1 second')::timestamp = v_local THEN
                v_instant := v_instant - v_shift * interval '1 second';
            END IF;
            IF v_instant > p_after THEN
                IF v_instant > timestamptz '9999-12-31 23:59:59.999999+00' THEN
                    RETURN NULL;
                END IF;
                RETURN v_instant;
            END IF;
            -- p_after is in the second pass of a repeated hour: every time until the end
            -- of that pass first occurred before p_after.
            v_jump := lane._tz_switch(v_instant, v_later)::timestamp
                      + v_shift * interval '1 second';
        END IF;
        -- Never backwards (only a zone breaking the one-switch-a-day assumption could).
        v_jump := greatest(v_jump, v_local + interval '1 second');
        v_year := extract(year FROM v_jump);
        v_month := extract(month FROM v_jump);
        v_day := extract(day FROM v_jump);
        v_hour := extract(hour FROM v_jump);
        v_minute := extract(minute FROM v_jump);
        v_second := floor(extract(second FROM v_jump));
    END LOOP;
END $$;

-- True for a time zone name of the tz database as listed by pg_timezone_names (without its
-- posix/ copies, posixrules and localtime, which name the server's own zone): the names
-- Python's zoneinfo.available_timezones() lists. Reading pg_timezone_names costs ~20 ms (it
-- opens every zone file), so it is only the last resort: set_config reports the name of
-- the file it loaded in that file's spelling, and a POSIX rule such as UTC+3 (which
-- set_config also takes) in upper case with a digit; a name spelt like its file with a
-- lower-case letter or without a digit is therefore a file. Only upper-case names with a
-- digit (EST5EDT, GMT+0, UTC+3) read the list: lane._check_repeat with tz Europe/Berlin
-- took 0.08 ms, with EST5EDT 21-24 ms.
CREATE OR REPLACE FUNCTION lane._is_zone_name(p_tz text)
RETURNS boolean LANGUAGE plpgsql STABLE SET TimeZone = 'UTC' AS $$
BEGIN
    IF p_tz IS NULL OR length(p_tz) > 255
       OR p_tz !~ '^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$'
       OR p_tz ~ '^(posix|right)/' OR p_tz IN ('posixrules', 'localtime') THEN
        RETURN false;
    END IF;
    BEGIN
        PERFORM set_config('TimeZone', p_tz, true);
    EXCEPTION WHEN invalid_parameter_value THEN
        RETURN false;
    END;
    IF current_setting('TimeZone') <> p_tz THEN
        RETURN false;
    END IF;
    IF p_tz ~ '[a-z]' OR p_tz !~ '[0-9]' THEN
        RETURN true;
    END IF;
    RETURN EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = p_tz);
END $$;

-- Checks a repeat document (see the top of this file) before any write; LN003 names the
-- first problem: an unknown key (in jsonb key order), then every_ms / pattern, tz, limit,
-- end_at, key. STABLE, not IMMUTABLE: the zone list is the server's tz data.
CREATE OR REPLACE FUNCTION lane._check_repeat(p_value jsonb)
RETURNS void LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_key text;
    v_every jsonb;
    v_pattern jsonb;
    v_tz jsonb;
    v_limit jsonb;
    v_end jsonb;
    v_series jsonb;
BEGIN
    IF p_value IS NULL OR jsonb_typeof(p_value) <> 'object' THEN
        PERFORM lane._fail('LN003', format(
            'repeat options must be a JSON object, got %s', coalesce(p_value::text, 'NULL')));
    END IF;
    SELECT key INTO v_key FROM jsonb_each(p_value)
     WHERE jsonb_typeof(value) <> 'null'
       AND key NOT IN ('end_at', 'every_ms', 'key', 'limit', 'pattern', 'tz')
     LIMIT 1;
    IF FOUND THEN
        PERFORM lane._fail('LN003', format(
            'unknown repeat option %L: known repeat options are end_at, every_ms, key, limit, '
            'pattern, tz', v_key));
    END IF;
    -- A JSON null means "not given": ->> of it and of an absent key are both NULL.
    v_every := nullif(p_value -> 'every_ms', 'null'::jsonb);
    v_pattern := nullif(p_value -> 'pattern', 'null'::jsonb);
    v_tz := nullif(p_value -> 'tz', 'null'::jsonb);
    v_limit := nullif(p_value -> 'limit', 'null'::jsonb);
    v_end := nullif(p_value -> 'end_at', 'null'::jsonb);
    v_series := nullif(p_value -> 'key', 'null'::jsonb);
    IF v_every IS NOT NULL AND v_pattern IS NOT NULL THEN
        PERFORM lane._fail('LN003',
            'repeat options take every_ms or pattern, not both');
    ELSIF v_every IS NULL AND v_pattern IS NULL THEN
        PERFORM lane._fail('LN003',
            'repeat options need every_ms (an interval in milliseconds) or pattern (a cron '
            'expression)');
    END IF;
    IF v_every IS NOT NULL THEN
        IF NOT lane._is_json_count(v_every, lane._max_duration_ms()) OR v_every = '0'::jsonb THEN
            PERFORM lane._fail('LN003', format(
                'every_ms must be an integer number of milliseconds between 1 and '
                '%s, got %s', lane._max_duration_ms(), v_every));
        END IF;
        IF v_tz IS NOT NULL THEN
            PERFORM lane._fail('LN003',
                'tz applies only to a pattern: an every_ms interval does not depend on a time '
                'zone');
        END IF;
    ELSE
        IF jsonb_typeof(v_pattern) <> 'string' THEN
            PERFORM lane._fail('LN003', format(
                'pattern must be a cron expression string, got %s', v_pattern));
        END IF;
        PERFORM lane._cron_parse(v_pattern #>> '{}');
        IF v_tz IS NOT NULL AND (jsonb_typeof(v_tz) <> 'string'
                                 OR NOT lane._is_zone_name(v_tz #>> '{}')) THEN
            PERFORM lane._fail('LN003', format(
                'unknown time zone %s: use a tz database name such as Europe/Berlin or UTC',
                v_tz));
        END IF;
    END IF;
    IF v_limit IS NOT NULL
       AND (NOT lane._is_json_count(v_limit, lane._max_int()) OR v_limit = '0'::jsonb) THEN
        PERFORM lane._fail('LN003', format(
            'limit must be an integer between 1 and %s (total runs, the first '
            'included), got %s', lane._max_int(), v_limit));
    END IF;
    IF v_end IS NOT NULL AND NOT lane._is_json_count(v_end, 253402300799999) THEN
        PERFORM lane._fail('LN003', format(
            'end_at must be integer milliseconds since 1970-01-01 UTC, between 0 and '
            '253402300799999 (9999-12-31), got %s', v_end));
    END IF;
    IF v_series IS NOT NULL AND (jsonb_typeof(v_series) <> 'string'
                                 OR length(v_series #>> '{}') NOT BETWEEN 1 AND 255) THEN
        PERFORM lane._fail('LN003', format(
            'key must be a string of 1-255 characters, got %s', v_series));
    END IF;
END $$;

-- When the next occurrence of a series is due, for a document lane._check_repeat accepted
-- (it is not checked again); NULL when that would be after end_at (or after 9999, or, for a
-- pattern, when none is found within lane._cron_next's bound). The caller counts runs
-- against limit.
--
--   every_ms, p_prev NULL:  p_now (the first run is due at once).
--   every_ms, p_prev given: anchored to the schedule, not to completion (A11): the first
--                           p_prev + k * every_ms (k >= 1) strictly after p_now; slots that
--                           passed while nothing ran are skipped.
--   pattern:                the first match strictly after greatest(p_prev, p_now).
--
-- Catch-up after downtime is the caller's choice of p_now: the real time skips the missed
-- ticks (the next tick in the future); p_now => p_prev gives the first missed tick (in the
-- past, so it runs at once), once: its own completion then passes the real time.
CREATE OR REPLACE FUNCTION lane._repeat_next(p_repeat jsonb, p_prev timestamptz,
                                             p_now timestamptz DEFAULT clock_timestamp())
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_step_us numeric;
    v_prev_us numeric;
    v_elapsed_us numeric;
    v_next_us numeric;
    v_next timestamptz;
BEGIN
    IF jsonb_typeof(p_repeat -> 'every_ms') = 'number' THEN
        IF p_prev IS NULL THEN
            v_next := v_now;
        ELSE
            -- Exact numeric microseconds: interval * number would go through a float.
            v_step_us := (p_repeat ->> 'every_ms')::numeric * 1000;
            v_prev_us := extract(epoch FROM p_prev) * 1000000;
            v_elapsed_us := extract(epoch FROM v_now) * 1000000 - v_prev_us;
            v_next_us := v_prev_us + v_step_us * CASE WHEN v_elapsed_us < 0 THEN 1
                                                      ELSE div(v_elapsed_us, v_step_us) + 1 END;
            IF v_next_us > 253402300799999999 THEN
                RETURN NULL;
            END IF;
            -- Whole hours plus seconds: an interval without days is absolute time in any
            -- session time zone.
            v_next := timestamptz 'epoch' + make_interval(
                hours => div(v_next_us, 3600000000)::integer,
                secs => (mod(v_next_us, 3600000000) / 1000000)::double precision);
        END IF;
    ELSIF jsonb_typeof(p_repeat -> 'pattern') = 'string' THEN
        v_next := lane._cron_next(p_repeat ->> 'pattern', p_repeat ->> 'tz',
                                  greatest(p_prev, v_now));
    ELSE
        PERFORM lane._fail('LN003', format(
            'not a repeat document (no every_ms or pattern): %s', p_repeat));
    END IF;
    IF v_next IS NOT NULL AND jsonb_typeof(p_repeat -> 'end_at') = 'number'
       AND extract(epoch FROM v_next) * 1000 > (p_repeat ->> 'end_at')::numeric THEN
        RETURN NULL;
    END IF;
    RETURN v_next;
END $$;
