-- Undoes 0013_idempotency_keys.sql: tables only, as every .down.sql.

DROP TABLE lane.idempotency_keys;
