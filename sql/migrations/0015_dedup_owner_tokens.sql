-- lane_pg schema version 15: owner tokens and job-less reservations on deduplication
-- owners (UNIQ-5, UNIQ-7, TX-10).
--
-- token names the push that took the id (the facade's unique and debounce pushes put one
-- in their deduplication document); lane.release_deduplication_key deletes a row only
-- while it still carries the caller's token, so a release never frees an id a newer push
-- took (Laravel PR #59567). A reservation (lane.reserve_deduplication_key) is a row with
-- kind 'unique', a token, an expiry and no job yet (job_id and job_key NULL): an
-- after-commit push_unique takes its lock at once and writes its job at commit, when the
-- add carrying the same token takes the row over.

ALTER TABLE lane.dedup_owners ADD COLUMN token text;
ALTER TABLE lane.dedup_owners ALTER COLUMN job_id DROP NOT NULL;
