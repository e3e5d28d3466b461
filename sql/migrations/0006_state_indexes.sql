-- lane_pg schema version 6: every state is found through a partial index of its own, and
-- the (queue, state) index over every row is gone (docs/decisions.md).
--
-- jobs_queue_state_idx took one more index entry on every insert and every state change
-- (state is indexed, so no change of state is a HOT update), ~1.4 ms of the ~16 ms that
-- 1,000-job add_jobs spent in the database. Worse, the planner picked it (or a seq scan)
-- for "is any job of this queue active/waiting?": mid-drain that walked every dead row
-- version of the queue, 1.2 ms of complete_jobs' 2.0 ms in W3. Each state now has its
-- partial index: waiting (jobs_waiting_idx), delayed (jobs_delayed_idx), active
-- (jobs_lease_idx), completed and failed (jobs_finished_idx), and waiting-children below.

DROP INDEX lane.jobs_queue_state_idx;
CREATE INDEX jobs_waiting_children_idx ON lane.jobs (queue, key) WHERE state = 'waiting-children';
