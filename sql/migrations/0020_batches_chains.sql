-- lane_pg schema version 20: batches and chains (BATCH-*, CHAIN-*).
--
-- lane.batches and lane.batch_settlements exist since version 1. A settlement now also
-- records a job removed before it finished ('deleted': settled, not failed), and the
-- failure's reason, which the batch's catch callback is given. Counts stay derived from
-- the settlement rows (one per job, written in the transaction that ends the job).
ALTER TABLE lane.batch_settlements DROP CONSTRAINT batch_settlements_outcome_check;
ALTER TABLE lane.batch_settlements
    ADD CONSTRAINT batch_settlements_outcome_check
        CHECK (outcome IN ('completed', 'failed', 'deleted')),
    ADD COLUMN reason text;
-- The jobs of one batch (its listing, cancel's removal of its waiting jobs).
CREATE INDEX jobs_batch_idx ON lane.jobs (batch_id) WHERE batch_id IS NOT NULL;
-- Unfinished batches (listings, the finish sweep); finished ones by age (prune).
CREATE INDEX batches_unfinished_idx ON lane.batches (created_at) WHERE finished_at IS NULL;
CREATE INDEX batches_finished_idx ON lane.batches (finished_at) WHERE finished_at IS NOT NULL;
