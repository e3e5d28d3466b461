DROP INDEX lane.batches_finished_idx;
DROP INDEX lane.batches_unfinished_idx;
DROP INDEX lane.jobs_batch_idx;
DELETE FROM lane.batch_settlements WHERE outcome = 'deleted';
ALTER TABLE lane.batch_settlements DROP COLUMN reason;
ALTER TABLE lane.batch_settlements DROP CONSTRAINT batch_settlements_outcome_check;
ALTER TABLE lane.batch_settlements
    ADD CONSTRAINT batch_settlements_outcome_check CHECK (outcome IN ('completed', 'failed'));
