-- Undoes 0015_dedup_owner_tokens.sql: reservations (rows without a job) go first.

DELETE FROM lane.dedup_owners WHERE job_id IS NULL;
ALTER TABLE lane.dedup_owners ALTER COLUMN job_id SET NOT NULL;
ALTER TABLE lane.dedup_owners DROP COLUMN token;
