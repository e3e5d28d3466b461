-- lane_pg stored functions: the in-process lane scheduler's storage (lane.lane_commands,
-- lane.lane_dead_letters; lane_pg.postgres.lane_storage.PostgresLaneStorage).
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).

-- Keeps (or replaces) an accepted command of storage p_storage.
CREATE OR REPLACE FUNCTION lane.save_lane_command(p_storage text, p_command_id text,
                                                  p_lane_id text, p_command_type text,
                                                  p_payload jsonb, p_submitted_at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(p_storage, '') = '' OR coalesce(p_command_id, '') = ''
       OR coalesce(p_lane_id, '') = '' OR coalesce(p_command_type, '') = '' THEN
        PERFORM lane._fail('LN000', format(
            'a lane command needs a storage, an id, a lane and a type, got %L, %L, %L, %L',
            p_storage, p_command_id, p_lane_id, p_command_type));
    END IF;
    INSERT INTO lane.lane_commands AS c (storage, command_id, lane_id, command_type, payload,
                                         submitted_at)
    VALUES (p_storage, p_command_id, p_lane_id, p_command_type, p_payload,
            coalesce(p_submitted_at, clock_timestamp()))
    ON CONFLICT (storage, command_id) DO UPDATE
       SET lane_id = EXCLUDED.lane_id, command_type = EXCLUDED.command_type,
           payload = EXCLUDED.payload, submitted_at = EXCLUDED.submitted_at;
END $$;

-- The commands of p_storage, in submission order.
CREATE OR REPLACE FUNCTION lane.load_lane_commands(p_storage text)
RETURNS TABLE (command_id text, lane_id text, command_type text, payload jsonb,
               submitted_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT c.command_id, c.lane_id, c.command_type, c.payload, c.submitted_at
      FROM lane.lane_commands c
     WHERE c.storage = p_storage
     ORDER BY c.submitted_at, c.command_id
$$;

CREATE OR REPLACE FUNCTION lane.remove_lane_command(p_storage text, p_command_id text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM lane.lane_commands WHERE storage = p_storage AND command_id = p_command_id;
    RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION lane.save_lane_dead_letter(p_storage text, p_lane_id text,
                                                      p_command_id text, p_command_type text,
                                                      p_error text, p_attempts integer,
                                                      p_failed_at timestamptz, p_payload jsonb)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(p_storage, '') = '' OR coalesce(p_command_id, '') = '' THEN
        PERFORM lane._fail('LN000', format(
            'a lane dead letter needs a storage and a command id, got %L, %L',
            p_storage, p_command_id));
    END IF;
    INSERT INTO lane.lane_dead_letters (storage, lane_id, command_id, command_type, error,
                                        attempts, failed_at, payload)
    VALUES (p_storage, p_lane_id, p_command_id, p_command_type, coalesce(p_error, ''),
            coalesce(p_attempts, 0), coalesce(p_failed_at, clock_timestamp()), p_payload);
END $$;

-- The dead letters of p_storage, oldest first.
CREATE OR REPLACE FUNCTION lane.load_lane_dead_letters(p_storage text)
RETURNS TABLE (lane_id text, command_id text, command_type text, error text, attempts integer,
               failed_at timestamptz, payload jsonb)
LANGUAGE sql STABLE AS $$
    SELECT d.lane_id, d.command_id, d.command_type, d.error, d.attempts, d.failed_at, d.payload
      FROM lane.lane_dead_letters d
     WHERE d.storage = p_storage
     ORDER BY d.id
$$;

-- Deletes every command and dead letter of p_storage.
CREATE OR REPLACE FUNCTION lane.clear_lane_storage(p_storage text)
RETURNS void LANGUAGE sql AS $$
    DELETE FROM lane.lane_commands WHERE storage = p_storage;
    DELETE FROM lane.lane_dead_letters WHERE storage = p_storage;
$$;
