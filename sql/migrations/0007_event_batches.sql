-- lane_pg schema version 7: one lane.events row for a statement's events of many jobs
-- (docs/decisions.md). A row with job_ids is a batch: sub-event k (1-based) has the id
-- id + k - 1, the row's event, job_ids[k] and datas[k] (or the row's data when datas is
-- NULL); lane.read_events expands batches and lane.trim_events counts their sub-events.
-- Row ids step by 1024, so a batch of up to 1,024 sub-events never meets the next row's id
-- and ids still increase per queue in the order the events were written (EVS-1).
--
-- Measured on 1,000-job lane.add_jobs_brief calls (this VM, medians of 9, interleaved):
-- 13.6 ms with the 2,000 single 'added' / 'waiting' rows, 9.2 ms without events, and the
-- batch of job ids and names ~0.4 ms in place of ~4.4 ms.

ALTER TABLE lane.events
    ADD COLUMN job_ids text[],
    ADD COLUMN datas jsonb[],
    ADD CONSTRAINT events_batch_shape CHECK (
        job_ids IS NULL AND datas IS NULL
        OR job_id IS NULL AND cardinality(job_ids) BETWEEN 1 AND 1024
           AND (datas IS NULL OR cardinality(datas) = cardinality(job_ids)));
ALTER TABLE lane.events ALTER COLUMN id SET INCREMENT BY 1024;
