-- Undoes 0009_dedup_owner_keys.sql: tables only, as every .down.sql.
DROP INDEX lane.dedup_owners_expiry_idx;
ALTER TABLE lane.dedup_owners DROP COLUMN job_key;
