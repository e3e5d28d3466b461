-- lane_pg schema version 13: idempotency keys (WORK-18). One row per (namespace, key) a
-- handler has taken through lane_pg.idempotency (lane.take_idempotency_key, 85_idempotency.sql).
--
-- The primary key is the only thing that makes a key taken once: a take is one
-- INSERT ... ON CONFLICT in the taker's transaction, so a concurrent taker of the same key
-- waits on the uncommitted index entry and then sees the committed row (taken) or, after
-- a rollback, no row and takes it itself; no advisory lock, no check-then-insert. result
-- is NULL until lane.record_idempotency_result stores a JSON outcome ('null' is a recorded
-- JSON null). A row whose expires_at has passed counts as absent: a take replaces it, and
-- lane.prune_idempotency_keys deletes such rows through the partial index.

CREATE TABLE lane.idempotency_keys (
    namespace  text NOT NULL,
    key        text NOT NULL,
    result     jsonb,
    created_at timestamptz NOT NULL,
    expires_at timestamptz,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX idempotency_keys_expiry_idx ON lane.idempotency_keys (expires_at)
    WHERE expires_at IS NOT NULL;
