-- Undoes 0012_flows.sql: tables only, as every .down.sql.

CREATE INDEX flow_deps_child_idx ON lane.flow_deps (child_queue, child_id);
CREATE INDEX jobs_parent_idx ON lane.jobs (parent_queue, parent_id) WHERE parent_id IS NOT NULL;
DROP INDEX lane.flow_deps_child_key_idx;
DROP INDEX lane.flow_deps_page_idx;
ALTER TABLE lane.flow_deps RESET (fillfactor);
ALTER TABLE lane.flow_deps DROP COLUMN child_key;
ALTER TABLE lane.flow_deps DROP COLUMN seq;
ALTER TABLE lane.jobs DROP COLUMN deps_pending;
