-- Undoes 0017_pause_all.sql: tables only, as every .down.sql. A global pause in force is
-- lifted; per-queue pauses stay.

DELETE FROM lane.settings WHERE key IN ('paused_all', 'restart_at');
ALTER TABLE lane.queues DROP COLUMN paused_all;
