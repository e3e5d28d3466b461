-- Undoes 0010_repeat_owners.sql: tables only, as every .down.sql.
DROP INDEX lane.jobs_repeat_owner_idx;
ALTER TABLE lane.repeat_schedulers DROP COLUMN tz;
ALTER TABLE lane.repeat_schedulers DROP COLUMN job_key;
