-- Undoes 0018_connection_unique_locks.sql: tables only, as every .down.sql. Unique locks
-- are per queue again; the kinds stay (the older functions only write them).

DROP INDEX lane.dedup_owners_unique_id_idx;
