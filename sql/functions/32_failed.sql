-- lane_pg stored functions: The failed-job store (FAIL-1, FAIL-2, FAIL-6, A4): records of terminal failures in lane.failed_jobs.
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- A record is written in the transaction of the terminal transition (lane._fail_terminal,
-- 05_transitions.sql) when its caller asks: lane.fail_jobs with p_failed_store_connection
-- (a worker whose failed store is this database), stalled recovery and flow failures for
-- typed jobs (options.meta.connection set). DatabaseFailedJobStore
-- (lane_pg/postgres/failed.py) reads and writes only through the functions below, so a
-- psql user gets the same rules.

-- The job record a failed_jobs row keeps; lane_pg.backend.failed.job_document builds the same
-- object from a JobRow (the memory store's records), key for key.
CREATE OR REPLACE FUNCTION lane._failed_job_document(p_job lane.jobs)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'queue', p_job.queue, 'id', p_job.id, 'name', p_job.name, 'data', p_job.data,
        'options', p_job.options, 'attempts_made', p_job.attempts_made,
        'attempts_started', p_job.attempts_started, 'max_attempts', p_job.max_attempts,
        'failed_reason', p_job.failed_reason, 'stacktrace', to_jsonb(p_job.stacktrace),
        'created_at_ms', lane._epoch_ms(p_job.created_at))
$$;

-- The connection a record names: p_fallback (the worker's connection, CONN-13: the name
-- the job can be retried through), else the label the push stored (options.meta.connection;
-- stalled recovery and flow failures, which no worker settles, pass NULL).
CREATE OR REPLACE FUNCTION lane._failed_job_connection(p_job lane.jobs, p_fallback text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(p_fallback,
                    CASE WHEN jsonb_typeof(p_job.options -> 'meta' -> 'connection') = 'string'
                         THEN p_job.options -> 'meta' ->> 'connection' END)
$$;

-- One record of a job that just failed for good (p_job as of that transition).
CREATE OR REPLACE FUNCTION lane._record_failed_job(p_job lane.jobs, p_connection text,
                                                   p_exception text, p_now timestamptz)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO lane.failed_jobs (id, connection, queue, job_name, envelope_json, exception,
                                  failed_at)
    VALUES (gen_random_uuid(), lane._failed_job_connection(p_job, p_connection), p_job.queue,
            p_job.name, lane._failed_job_document(p_job),
            coalesce(p_exception, p_job.failed_reason, ''), p_now)
$$;

-- FAIL-1 log(record): a record made elsewhere (DatabaseFailedJobStore.log). A NULL id
-- gets a new UUID; a record whose id is stored already is left as it is (a repeated log
-- writes nothing twice). Returns the id.
CREATE OR REPLACE FUNCTION lane.log_failed_job(p_id uuid, p_connection text, p_queue text,
                                               p_job_name text, p_envelope jsonb,
                                               p_exception text,
                                               p_failed_at timestamptz DEFAULT NULL)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid := coalesce(p_id, gen_random_uuid());
BEGIN
    IF coalesce(p_connection, '') = '' OR coalesce(p_queue, '') = ''
       OR coalesce(p_job_name, '') = '' THEN
        PERFORM lane._fail('LN003', 'a failed-job record needs a connection, a queue and a job name');
    END IF;
    IF jsonb_typeof(p_envelope) IS DISTINCT FROM 'object' THEN
        PERFORM lane._fail('LN003', format('a failed-job record''s envelope must be a JSON object, got %s',
                                           coalesce(p_envelope::text, 'NULL')));
    END IF;
    INSERT INTO lane.failed_jobs (id, connection, queue, job_name, envelope_json, exception,
                                  failed_at)
    VALUES (v_id, p_connection, p_queue, p_job_name, p_envelope, coalesce(p_exception, ''),
            coalesce(p_failed_at, clock_timestamp()))
    ON CONFLICT (id) DO NOTHING;
    RETURN v_id;
END $$;

-- FAIL-1 / CLI-8: one keyset page, oldest first, after (p_after_failed_at, p_after_id)
-- (both NULL: from the start); NULL filters match every record, p_before keeps records
-- that failed before it.
CREATE OR REPLACE FUNCTION lane.failed_jobs_page(p_after_failed_at timestamptz DEFAULT NULL,
                                                 p_after_id uuid DEFAULT NULL,
                                                 p_limit integer DEFAULT 100,
                                                 p_queue text DEFAULT NULL,
                                                 p_job_name text DEFAULT NULL,
                                                 p_before timestamptz DEFAULT NULL)
RETURNS SETOF lane.failed_jobs LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        PERFORM lane._fail('LN003', format('a page holds 1 to 10000 records, got %s',
                                           coalesce(p_limit::text, 'NULL')));
    END IF;
    IF (p_after_failed_at IS NULL) <> (p_after_id IS NULL) THEN
        PERFORM lane._fail('LN003', 'a page starts after a (failed_at, id) pair: give both or neither');
    END IF;
    RETURN QUERY
    SELECT f.* FROM lane.failed_jobs f
     WHERE (p_after_failed_at IS NULL OR (f.failed_at, f.id) > (p_after_failed_at, p_after_id))
       AND (p_queue IS NULL OR f.queue = p_queue)
       AND (p_job_name IS NULL OR f.job_name = p_job_name)
       AND (p_before IS NULL OR f.failed_at < p_before)
     ORDER BY f.failed_at, f.id
     LIMIT p_limit;
END $$;

CREATE OR REPLACE FUNCTION lane.count_failed_jobs(p_queue text DEFAULT NULL,
                                                  p_job_name text DEFAULT NULL,
                                                  p_before timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM lane.failed_jobs f
     WHERE (p_queue IS NULL OR f.queue = p_queue)
       AND (p_job_name IS NULL OR f.job_name = p_job_name)
       AND (p_before IS NULL OR f.failed_at < p_before)
$$;

CREATE OR REPLACE FUNCTION lane.find_failed_job(p_id uuid)
RETURNS SETOF lane.failed_jobs LANGUAGE sql STABLE AS $$
    SELECT * FROM lane.failed_jobs WHERE id = p_id
$$;

-- FAIL-6 forget(id): whether a record went.
CREATE OR REPLACE FUNCTION lane.forget_failed_job(p_id uuid)
RETURNS boolean LANGUAGE sql AS $$
    WITH gone AS (DELETE FROM lane.failed_jobs WHERE id = p_id RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM gone)
$$;

-- FAIL-6 flush(before): every record, or those that failed before p_before; how many went.
CREATE OR REPLACE FUNCTION lane.flush_failed_jobs(p_before timestamptz DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS $$
    WITH gone AS (DELETE FROM lane.failed_jobs
                   WHERE p_before IS NULL OR failed_at < p_before RETURNING 1)
    SELECT count(*) FROM gone
$$;
