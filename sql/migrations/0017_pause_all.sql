-- lane_pg schema version 17: the connection-wide pause (PAUSE-4, A8, A22) and the
-- restart signal (CLI-6), both rows of lane.settings.
--
-- lane.queues.paused_all mirrors the global switch on every queue row: the claim already
-- reads the queue row, so it honours the global pause without an extra read (one more
-- column in the same SELECT). lane.pause_all / lane.resume_all set the settings row and
-- every queue row in one transaction; a queue created later takes the settings row's
-- value (lane._ensure_queue, lane.add_job). It is separate from lane.queues.paused, so
-- resume_all leaves per-queue pauses alone (PAUSE-4).

ALTER TABLE lane.queues ADD COLUMN paused_all boolean NOT NULL DEFAULT false;

-- The row exists from the start: pause_all updates it, and a queue insert reads it
-- FOR SHARE, so the two serialise on it (a queue created while pause_all runs is paused).
INSERT INTO lane.settings (key, value) VALUES ('paused_all', 'false') ON CONFLICT DO NOTHING;
