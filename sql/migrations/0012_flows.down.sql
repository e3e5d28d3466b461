-- Undoes 0012_flows.sql: tables only, as every .down.sql.

DROP INDEX lane.flow_deps_bucket_idx;
ALTER TABLE lane.flow_deps DROP COLUMN seq;
ALTER TABLE lane.flow_deps DROP COLUMN child_key;
ALTER TABLE lane.jobs DROP COLUMN deps_pending;
