-- lane_pg schema version 12: flows (FLOW-*). A parent counts its pending children, and its
-- dependency rows are paged by bucket.
--
-- jobs.deps_pending is NULL for a job that never had children and otherwise the number of
-- its children still unprocessed: a child's terminal outcome decrements it under the
-- parent's row lock, and the parent is released when it reaches 0, so a completion costs
-- the same whatever the flow's size (no scan of the siblings; BullMQ's fan-in counts a set
-- per completion). flow_deps.seq orders one bucket's rows for the keyset pages of
-- lane.get_flow_dependency_page (a cursor is the last seq read; BullMQ's getDependencies
-- took minutes at 40,000 children).

ALTER TABLE lane.jobs ADD COLUMN deps_pending integer;
ALTER TABLE lane.flow_deps ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
-- The child row as attached (a read joins on the primary key; a row gone is "missing").
ALTER TABLE lane.flow_deps ADD COLUMN child_key bigint;
CREATE INDEX flow_deps_bucket_idx ON lane.flow_deps (parent_key, bucket, seq);
