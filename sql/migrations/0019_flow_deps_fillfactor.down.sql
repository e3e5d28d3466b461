-- Undoes 0019_flow_deps_fillfactor.sql.

ALTER TABLE lane.flow_deps SET (fillfactor = 70);
