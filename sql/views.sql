-- lane_pg reporting views (SQLR-1): stable, documented in README.md, safe to query from
-- psql or any reporting tool. Re-applied on every migrate (CREATE OR REPLACE).

-- Jobs per queue and state (only states that have jobs).
CREATE OR REPLACE VIEW lane.job_counts AS
SELECT queue, state, count(*) AS count
  FROM lane.jobs
 GROUP BY queue, state;

-- One row per queue: pause flag, the six state counts and the configured limits.
CREATE OR REPLACE VIEW lane.queue_stats AS
SELECT q.name AS queue,
       q.paused,
       count(j.key) FILTER (WHERE j.state = 'waiting') AS waiting,
       count(j.key) FILTER (WHERE j.state = 'delayed') AS delayed,
       count(j.key) FILTER (WHERE j.state = 'active') AS active,
       count(j.key) FILTER (WHERE j.state = 'waiting-children') AS waiting_children,
       count(j.key) FILTER (WHERE j.state = 'completed') AS completed,
       count(j.key) FILTER (WHERE j.state = 'failed') AS failed,
       q.max_active,
       q.rate_max,
       q.rate_duration_ms
  FROM lane.queues q
  LEFT JOIN lane.jobs j ON j.queue = q.name
 GROUP BY q.name;

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
-- them; progress is the percent settled rounded down (as lane_pg.Batch.progress()).
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
  FROM lane.batches b
 CROSS JOIN LATERAL lane.find_batch(b.id) f;
