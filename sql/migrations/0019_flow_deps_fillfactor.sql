-- lane_pg schema version 19: flow_deps pages keep room for every row's completion.
--
-- A child's completion updates its dependency row in place (lane._flow_complete); the
-- update is HOT only while the row's page has room for the new version. A worker
-- completes children in attach order, so one batch updates most rows of a page in one
-- transaction, before any old version can be pruned: at fillfactor 70 a page held ~57
-- rows and room for ~24 new versions, and a third of the updates (18,782 of 55,000 in
-- F2's loop) were not HOT, each writing three index entries. At 45 every update of F2's
-- loop was HOT (30,000 of 30,000) and a child's completion went from ~1.20x to ~1.12x a
-- plain one (interleaved batches of 50, one session). The price is a table ~1.5x larger,
-- which a page read stepping over a whole parent's rows pays (docs/decisions.md).
-- Existing pages keep their layout; new ones follow.

ALTER TABLE lane.flow_deps SET (fillfactor = 45);
