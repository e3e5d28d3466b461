-- lane_pg stored functions: Chains (CHAIN-*): jobs that run one after another, each link
-- added when the one before it completes.
-- Applied in file-name order after the migrations, on every migrate
-- (lane_pg/postgres/schema/install.py).
--
-- A chain lives in its current link's options.chain: {"id", "index" (this link's position,
-- 0 for the head), "links" (the specs still to come: queue, name, data, options), "catch"
-- (a callback name, or absent)}. lane._complete adds the next link in the transaction that
-- completes this one (lane._chain_advance): a crash cannot lose it, and the completion is
-- fenced by the lock token, so a run that lost its lease adds nothing. A link's id is
-- <chain id>-<index>: a repeat of the add collapses on the custom id. A link that fails for
-- good ends the chain (lane._fail_terminal -> lane._chain_broken), which enqueues the
-- chain's catch callback once, as the job chain-<id>-catch; a removed link ends it quietly.
-- Each link is a new job: its attempts start from zero.

-- The head's add, with every link's spec checked first (a bad link adds nothing).
CREATE OR REPLACE FUNCTION lane.add_chain(p_id text, p_queues text[], p_names text[],
                                          p_datas jsonb[], p_options jsonb[],
                                          p_catch text DEFAULT NULL,
                                          p_catch_queue text DEFAULT NULL,
                                          p_now timestamptz DEFAULT NULL)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_n integer := coalesce(cardinality(p_names), 0);
    v_links jsonb := '[]';
    v_i integer;
BEGIN
    IF p_id IS NULL OR p_id !~ '^[A-Za-z0-9_.-]{1,100}$' OR p_id ~ '^[0-9]+$' THEN
        PERFORM lane._fail('LN003', format(
            'a chain id is 1-100 letters, digits, dots, dashes or underscores, not all'
            ' digits; got %L', p_id));
    END IF;
    IF v_n = 0 THEN
        PERFORM lane._fail('LN003', 'a chain needs at least one job');
    END IF;
    PERFORM lane._check_spec_arrays('chain', p_queues, p_names, p_datas, p_options);
    IF p_catch IS NOT NULL AND length(p_catch) NOT BETWEEN 1 AND 255 THEN
        PERFORM lane._fail('LN003', 'a chain''s catch names a registered callback: 1-255 characters');
    END IF;
    IF p_catch_queue IS NOT NULL THEN
        PERFORM lane._check_queue(p_catch_queue);
    END IF;
    FOR v_i IN 1 .. v_n LOOP
        PERFORM lane._check_queue(p_queues[v_i]);
        PERFORM lane._check_name(p_names[v_i]);
        PERFORM lane._check_options(coalesce(p_options[v_i], '{}'));
        IF p_options[v_i] ?| ARRAY['job_id', 'deduplication', 'repeat'] THEN
            PERFORM lane._fail('LN003', format(
                'link %s of the chain (%s): a chain''s jobs take no job_id, deduplication or'
                ' repeat option', v_i, p_names[v_i]));
        END IF;
        IF v_i > 1 THEN
            v_links := v_links || jsonb_build_array(jsonb_build_object(
                'queue', p_queues[v_i], 'name', p_names[v_i], 'data', p_datas[v_i],
                'options', coalesce(p_options[v_i], '{}')));
        END IF;
    END LOOP;
    RETURN lane._chain_add(p_queues[1], p_names[1], p_datas[1], coalesce(p_options[1], '{}'),
                           jsonb_strip_nulls(jsonb_build_object(
                               'id', p_id, 'index', 0, 'links', v_links, 'catch', p_catch,
                               'catch_queue', coalesce(p_catch_queue, p_queues[1]))),
                           v_now);
END $$;

-- Adds one link with its chain document.
CREATE OR REPLACE FUNCTION lane._chain_add(p_queue text, p_name text, p_data jsonb,
                                           p_options jsonb, p_chain jsonb, p_now timestamptz)
RETURNS lane.jobs LANGUAGE plpgsql AS $$
DECLARE
    v_job lane.jobs;
BEGIN
    v_job := lane.add_job(p_queue, p_name, p_data,
                          p_options || jsonb_build_object(
                              'job_id', format('%s-%s', p_chain ->> 'id', p_chain ->> 'index')),
                          p_now);
    UPDATE lane.jobs SET options = options || jsonb_build_object('chain', p_chain)
     WHERE key = (SELECT key FROM lane.jobs WHERE queue = v_job.queue AND id = v_job.id)
       AND NOT options ? 'chain'
    RETURNING * INTO v_job;
    IF NOT FOUND THEN  -- the link was added before (a repeated add): it is as it was
        SELECT * INTO v_job FROM lane.jobs
         WHERE queue = p_queue AND id = format('%s-%s', p_chain ->> 'id', p_chain ->> 'index');
    END IF;
    RETURN v_job;
END $$;

-- CHAIN-1, CHAIN-4: the next link of each completed chain link among p_jobs, in the
-- completing transaction. Its own delay counts from now (CHAIN-2).
CREATE OR REPLACE FUNCTION lane._chain_advance(p_jobs lane.jobs[], p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_chain jsonb;
    v_next jsonb;
BEGIN
    FOR v_chain IN SELECT j.options -> 'chain' FROM unnest(p_jobs) j
                    WHERE j.options ? 'chain' ORDER BY j.key LOOP
        IF jsonb_array_length(v_chain -> 'links') = 0 THEN
            CONTINUE;  -- the last link: the chain is done
        END IF;
        v_next := v_chain -> 'links' -> 0;
        PERFORM lane._chain_add(
            v_next ->> 'queue', v_next ->> 'name', v_next -> 'data', v_next -> 'options',
            v_chain || jsonb_build_object('index', (v_chain ->> 'index')::integer + 1,
                                          'links', (v_chain -> 'links') - 0),
            p_now);
    END LOOP;
END $$;

-- A chain link failed for good: the chain ends, and its catch callback (if any) is
-- enqueued once, given the failure.
CREATE OR REPLACE FUNCTION lane._chain_broken(p_job lane.jobs, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_chain jsonb := p_job.options -> 'chain';
BEGIN
    IF v_chain ->> 'catch' IS NULL THEN
        RETURN;
    END IF;
    PERFORM lane.add_job(
        v_chain ->> 'catch_queue', 'lane_pg:chain_callback',
        jsonb_build_object('chain_id', v_chain ->> 'id', 'kind', 'catch',
                           'callback', v_chain ->> 'catch', 'error', p_job.failed_reason,
                           'queue', p_job.queue, 'job_id', p_job.id, 'name', p_job.name),
        lane._callback_retry()
            || jsonb_build_object('job_id', format('chain-%s-catch', v_chain ->> 'id')),
        p_now);
END $$;
