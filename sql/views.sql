-- lane_pg reporting views (SQLR-1..4): stable, documented in docs/sql.md ("Reporting
-- views"), safe to query from psql or any reporting tool. Re-applied on every migrate
-- (CREATE OR REPLACE: a column may be added at the end, never renamed or retyped).
--
-- A view's WHERE queue = ... must read that queue's rows, not the table (migration 0006
-- dropped the (queue, state) index over every row for its write cost): jobs are read one
-- state at a time, each state through its partial index, whose leading column is the
-- queue (waiting: jobs_waiting_idx, delayed: jobs_delayed_idx, waiting-children:
-- jobs_waiting_children_idx, completed and failed: jobs_finished_idx). The active jobs'
-- index (jobs_lease_idx, by lease expiry) has no queue column: a queue's active count
-- reads every active row, which the workers' concurrency bounds. No index was added for
-- the views (their writes cost nothing). tests/postgres/test_reporting_views.py checks
-- the plans on 100,000 jobs in 20 queues.

-- One row per job, one branch per state so that a queue filter is pushed into each branch
-- and answered by that state's partial index, and a state filter leaves one branch (the
-- others become "One-Time Filter: false"). Measured, 100,000 jobs in 20 queues (5,000 in
-- the queue), after VACUUM ANALYZE: WHERE queue = 'q' read 5,950 rows (its 5,000 and the
-- 950 active rows of other queues) in 7-10 ms, where the same filter on lane.jobs read all
-- 100,000 in 11 ms (a seq scan: no index leads with the queue alone; the queue's rows
-- were spread over every page, so the pages read were about the same). The cost falls on
-- a read of every job: the planner scans the table once for each large state, 47-52 ms
-- against 10.5 ms for SELECT * FROM lane.jobs; a lookup by id alone likewise (use
-- lane.get_job(queue, id)).
CREATE OR REPLACE VIEW lane.v_jobs AS
SELECT j.queue, j.id, j.name, j.state, j.priority, j.attempts_made, j.attempts_started,
       j.max_attempts, j.created_at, j.available_at, j.processed_at, j.finished_at,
       j.failed_reason, j.return_value, j.data, j.progress, j.batch_id, j.parent_queue,
       j.parent_id, j.worker_id, j.lease_expires_at
  FROM lane.jobs j WHERE j.state = 'waiting'
UNION ALL
SELECT j.queue, j.id, j.name, j.state, j.priority, j.attempts_made, j.attempts_started,
       j.max_attempts, j.created_at, j.available_at, j.processed_at, j.finished_at,
       j.failed_reason, j.return_value, j.data, j.progress, j.batch_id, j.parent_queue,
       j.parent_id, j.worker_id, j.lease_expires_at
  FROM lane.jobs j WHERE j.state = 'delayed'
UNION ALL
SELECT j.queue, j.id, j.name, j.state, j.priority, j.attempts_made, j.attempts_started,
       j.max_attempts, j.created_at, j.available_at, j.processed_at, j.finished_at,
       j.failed_reason, j.return_value, j.data, j.progress, j.batch_id, j.parent_queue,
       j.parent_id, j.worker_id, j.lease_expires_at
  FROM lane.jobs j WHERE j.state = 'active'
UNION ALL
SELECT j.queue, j.id, j.name, j.state, j.priority, j.attempts_made, j.attempts_started,
       j.max_attempts, j.created_at, j.available_at, j.processed_at, j.finished_at,
       j.failed_reason, j.return_value, j.data, j.progress, j.batch_id, j.parent_queue,
       j.parent_id, j.worker_id, j.lease_expires_at
  FROM lane.jobs j WHERE j.state = 'waiting-children'
UNION ALL
SELECT j.queue, j.id, j.name, j.state, j.priority, j.attempts_made, j.attempts_started,
       j.max_attempts, j.created_at, j.available_at, j.processed_at, j.finished_at,
       j.failed_reason, j.return_value, j.data, j.progress, j.batch_id, j.parent_queue,
       j.parent_id, j.worker_id, j.lease_expires_at
  FROM lane.jobs j WHERE j.state = 'completed'
UNION ALL
SELECT j.queue, j.id, j.name, j.state, j.priority, j.attempts_made, j.attempts_started,
       j.max_attempts, j.created_at, j.available_at, j.processed_at, j.finished_at,
       j.failed_reason, j.return_value, j.data, j.progress, j.batch_id, j.parent_queue,
       j.parent_id, j.worker_id, j.lease_expires_at
  FROM lane.jobs j WHERE j.state = 'failed';

-- One row per queue (lane.queues): the pause flag, the six state counts (as
-- lane.get_queue_stats counts them) and the claim limits. Each count is a subquery on one
-- state's partial index for the queue row's name, so WHERE queue = 'q' reads that queue's
-- rows only. Measured, 100,000 jobs in 20 queues (5,000 in the queue): the old
-- lane.queue_stats (a LEFT JOIN grouped by queue) read all 100,000 rows with a seq scan
-- (12.5 ms; lane.job_counts 27.9 ms); this reads 5,950 (its 5,000 and the 950 active rows
-- of other queues): 9.2 ms in bitmap scans right after the load, 1.4 ms in index-only
-- scans once vacuumed. Every queue: 17.6 ms (vacuumed).
CREATE OR REPLACE VIEW lane.v_queue_stats AS
SELECT q.name AS queue,
       q.paused,
       (SELECT count(*) FROM lane.jobs j
         WHERE j.queue = q.name AND j.state = 'waiting') AS waiting,
       (SELECT count(*) FROM lane.jobs j
         WHERE j.queue = q.name AND j.state = 'delayed') AS delayed,
       (SELECT count(*) FROM lane.jobs j
         WHERE j.queue = q.name AND j.state = 'active') AS active,
       (SELECT count(*) FROM lane.jobs j
         WHERE j.queue = q.name AND j.state = 'waiting-children') AS waiting_children,
       (SELECT count(*) FROM lane.jobs j
         WHERE j.queue = q.name AND j.state = 'completed') AS completed,
       (SELECT count(*) FROM lane.jobs j
         WHERE j.queue = q.name AND j.state = 'failed') AS failed,
       q.max_active,
       q.rate_max,
       q.rate_duration_ms
  FROM lane.queues q;

-- Every state of every queue, zeros included (lane.get_job_counts' rows; ORDER BY for an
-- order); the counts of v_queue_stats, so the same reads.
CREATE OR REPLACE VIEW lane.v_queue_counts AS
SELECT s.queue, c.state, c.count
  FROM lane.v_queue_stats s
 CROSS JOIN LATERAL (VALUES ('waiting'::text, s.waiting), ('delayed', s.delayed),
                            ('active', s.active), ('waiting-children', s.waiting_children),
                            ('completed', s.completed), ('failed', s.failed))
       AS c(state, count);

-- The failed-job store's records (lane.failed_jobs) with the job's row while it is
-- retained (NULL columns once it is gone); job_id is the record's job id (its job
-- document's "id"), the job found as lane._job_keys finds it (primary key for a generated
-- id, jobs_custom_id_idx for a custom one). A queue filter reads failed_jobs_queue_idx.
CREATE OR REPLACE VIEW lane.v_failed_jobs AS
SELECT f.id,
       f.connection,
       f.queue,
       r.job_id,
       f.job_name,
       f.exception,
       f.failed_at,
       f.envelope_json AS envelope,
       j.state AS job_state,
       j.attempts_made,
       j.max_attempts,
       j.failed_reason,
       j.finished_at,
       j.data
  FROM lane.failed_jobs f
 CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(f.envelope_json -> 'id') = 'string'
                                 THEN f.envelope_json ->> 'id' END AS job_id) r
  LEFT JOIN LATERAL (
       SELECT x.state, x.attempts_made, x.max_attempts, x.failed_reason, x.finished_at, x.data
         FROM (SELECT k.* FROM lane.jobs k
                WHERE k.key = CASE WHEN r.job_id ~ '^[1-9][0-9]{0,17}$'
                                   THEN r.job_id::bigint END
                  AND k.queue = f.queue AND k.id = r.job_id
               UNION ALL
               SELECT k.* FROM lane.jobs k
                WHERE k.queue = f.queue AND k.id = r.job_id AND k.id <> k.key::text) x
        LIMIT 1) j ON true;

-- Jobs that finished per queue, state and minute, from lane.metrics (the counts
-- lane.get_metrics reads): a minute's per-connection rows summed. The row whose minute is
-- '-infinity' holds the minutes older than the retained data points, so sum(count) per
-- queue and state is the all-time count (get_metrics' count). Counts every job, removed
-- or pruned ones too.
CREATE OR REPLACE VIEW lane.v_terminal_metrics AS
SELECT m.queue, m.state, date_trunc('minute', m.minute, 'UTC') AS minute,
       sum(m.count)::bigint AS count
  FROM lane.metrics m
 GROUP BY m.queue, m.state, date_trunc('minute', m.minute, 'UTC');

-- Live repeat series (lane.list_repeats' rows, without its clean-up of dead ones: a row
-- whose owner occurrence is gone, finished or not its own is left out), next_at being when
-- the owner is due.
CREATE OR REPLACE VIEW lane.v_repeat_schedulers AS
SELECT s.queue,
       s.key,
       j.id AS job_id,
       s.name,
       j.available_at AS next_at,
       s.count,
       s.every_ms,
       s.pattern,
       s.tz,
       s.limit_count,
       s.start_at,
       s.end_at,
       s.template -> 'options' AS options,
       s.updated_at
  FROM lane.repeat_schedulers s
  JOIN lane.jobs j ON j.key = s.job_key
 WHERE j.queue = s.queue AND j.repeat_key = s.key AND j.state NOT IN ('completed', 'failed');

-- One row per flow dependency, in attach order per parent: the bucket it is in
-- (unprocessed, processed, failed, ignored, removed), the child's return value (processed)
-- or failure reason, and the child's current state (NULL once its row is gone). For
-- reports over many flows: WHERE parent_queue = 'q' AND parent_id = 'x' seq-scans
-- lane.jobs for the parent (measured, 100,000 jobs and 24,000 dependencies: 13 ms; a
-- branch per state for the parent, as in v_jobs, took 19 ms, and 72 ms against 28 ms for
-- a whole queue's flows). One flow: lane.get_flow_dependencies (18_flows_inspect.sql).
CREATE OR REPLACE VIEW lane.v_flow_dependencies AS
SELECT p.queue AS parent_queue,
       p.id AS parent_id,
       d.child_queue,
       d.child_id,
       d.bucket,
       c.state AS child_state,
       d.value,
       d.reason,
       d.policy,
       d.seq,
       d.updated_at
  FROM lane.flow_deps d
  JOIN lane.jobs p ON p.key = d.parent_key
  LEFT JOIN lane.jobs c ON c.key = d.child_key;

-- The retained events (lane.event_log: a batch row gives one event per job), with the
-- fields reports filter on taken out of data: prev (the state left) and failed_reason.
-- A queue filter reads events_pkey (queue, id).
CREATE OR REPLACE VIEW lane.v_events AS
SELECT l.id,
       l.queue,
       l.event,
       l.job_id,
       l.data ->> 'prev' AS prev,
       l.data ->> 'failedReason' AS failed_reason,
       l.data,
       l.created_at AS at
  FROM lane.event_log l;

-- Throughput and latency per queue and minute over the last hour (the current minute and
-- the 59 before it), from the retained finished jobs: completed and failed counts, and
-- the wait (processed_at - available_at) and run (finished_at - processed_at) times in
-- milliseconds, p50/p95/p99 over the minute's finished jobs. Bounded: each queue reads
-- two ranges of jobs_finished_idx (queue, state, finished_at), its completed and its
-- failed jobs inside the window, never older rows (one branch per state: with
-- state IN (...) the index condition left the state out and walked every finished entry
-- of the queue). Jobs removed on completion or pruned are not counted here (their counts
-- are in v_terminal_metrics).
CREATE OR REPLACE VIEW lane.v_throughput AS
SELECT q.name AS queue,
       t.minute,
       t.completed,
       t.failed,
       t.wait_p50_ms,
       t.wait_p95_ms,
       t.wait_p99_ms,
       t.run_p50_ms,
       t.run_p95_ms,
       t.run_p99_ms
  FROM lane.queues q
 CROSS JOIN LATERAL (
       SELECT date_trunc('minute', f.finished_at, 'UTC') AS minute,
              count(*) FILTER (WHERE f.state = 'completed') AS completed,
              count(*) FILTER (WHERE f.state = 'failed') AS failed,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY f.wait_ms) AS wait_p50_ms,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY f.wait_ms) AS wait_p95_ms,
              percentile_cont(0.99) WITHIN GROUP (ORDER BY f.wait_ms) AS wait_p99_ms,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY f.run_ms) AS run_p50_ms,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY f.run_ms) AS run_p95_ms,
              percentile_cont(0.99) WITHIN GROUP (ORDER BY f.run_ms) AS run_p99_ms
         FROM (SELECT j.state, j.finished_at,
                      extract(epoch FROM j.processed_at - j.available_at)::float8 * 1000
                          AS wait_ms,
                      extract(epoch FROM j.finished_at - j.processed_at)::float8 * 1000
                          AS run_ms
                 FROM lane.jobs j
                WHERE j.queue = q.name AND j.state = 'completed'
                  AND j.finished_at >= date_trunc('minute', now(), 'UTC')
                                       - interval '59 minutes'
               UNION ALL
               SELECT j.state, j.finished_at,
                      extract(epoch FROM j.processed_at - j.available_at)::float8 * 1000
                          AS wait_ms,
                      extract(epoch FROM j.finished_at - j.processed_at)::float8 * 1000
                          AS run_ms
                 FROM lane.jobs j
                WHERE j.queue = q.name AND j.state = 'failed'
                  AND j.finished_at >= date_trunc('minute', now(), 'UTC')
                                       - interval '59 minutes') f
        GROUP BY 1) t;

-- The older names, kept (documented before the v_* views): thin views over the ones above.

-- Jobs per queue and state (only states that have jobs).
CREATE OR REPLACE VIEW lane.job_counts AS
SELECT queue, state, count FROM lane.v_queue_counts WHERE count > 0;

-- One row per queue: pause flag, the six state counts and the configured limits.
CREATE OR REPLACE VIEW lane.queue_stats AS
SELECT queue, paused, waiting, delayed, active, waiting_children, completed, failed,
       max_active, rate_max, rate_duration_ms
  FROM lane.v_queue_stats;

-- How long the oldest ready job of each queue has been waiting (a backlog alarm).
CREATE OR REPLACE VIEW lane.waiting_age AS
SELECT queue,
       count(*) AS waiting,
       min(available_at) AS oldest_available_at,
       now() - min(available_at) AS oldest_wait
  FROM lane.jobs
 WHERE state = 'waiting'
 GROUP BY queue;

-- Retained failed jobs with their reasons, newest first.
CREATE OR REPLACE VIEW lane.job_failures AS
SELECT queue, id, name, failed_reason, attempts_made, attempts_started, max_attempts,
       finished_at AS failed_at, data
  FROM lane.jobs
 WHERE state = 'failed'
 ORDER BY finished_at DESC;

-- One row per batch, its counts derived from the settlements as lane.find_batch derives
-- them (the same query, written out: a function called from a view runs with the rights
-- of whoever selects, and a reader may select the view, not lane.batches); progress is
-- the percent settled rounded down (as lane_pg.Batch.progress()).
CREATE OR REPLACE VIEW lane.v_batches AS
SELECT f.id,
       f.name,
       CASE WHEN f.finished_at IS NOT NULL THEN 'finished'
            WHEN f.cancelled_at IS NOT NULL THEN 'cancelled'
            ELSE 'pending' END AS state,
       f.total_jobs,
       f.pending_jobs,
       f.total_jobs - f.pending_jobs AS settled_jobs,
       f.failed_jobs,
       CASE WHEN f.total_jobs = 0 THEN 0
            ELSE (f.total_jobs - f.pending_jobs) * 100 / f.total_jobs END AS progress,
       f.created_at,
       f.cancelled_at,
       f.finished_at
  FROM (SELECT b.id, b.name, b.total_jobs,
               greatest(0, b.total_jobs - coalesce(s.settled, 0))::integer AS pending_jobs,
               coalesce(s.failed, 0)::integer AS failed_jobs,
               b.created_at, b.cancelled_at, b.finished_at
          FROM lane.batches b
          LEFT JOIN LATERAL (
              SELECT count(*) AS settled, count(*) FILTER (WHERE x.outcome = 'failed') AS failed
                FROM lane.batch_settlements x WHERE x.batch_id = b.id) s ON true) f;
