-- Undoes 0022_lane_storage.sql.

DROP TABLE lane.lane_dead_letters;
DROP TABLE lane.lane_commands;
