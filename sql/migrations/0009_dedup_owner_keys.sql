-- lane_pg schema version 9: deduplication owners name their job by key (DEDUP-*).
--
-- An owner row is usable only while the job it names exists and carries its dedup id
-- (DEDUP-15); the key makes that check one primary-key probe, and a release
-- (`DELETE ... WHERE job_key = <own job>`) can never remove a newer owner of the same id
-- (BullMQ #3232). job_id stays for reports. The expiry index serves the periodic sweep
-- of owners whose TTL ran out (lane.expire_dedup_owners).

ALTER TABLE lane.dedup_owners ADD COLUMN job_key bigint;
CREATE INDEX dedup_owners_expiry_idx ON lane.dedup_owners (expires_at)
    WHERE expires_at IS NOT NULL;
