-- Tokens may have the audience `metrics` (GET /metrics, docs/operations.md).
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt
-- with the same columns and rows. No other table references tokens.

CREATE TABLE tokens_0013 (
  id TEXT PRIMARY KEY,
  principal_id TEXT NOT NULL REFERENCES principals(id),
  audience TEXT NOT NULL CHECK (audience IN ('api', 'lifecycle', 'metrics')),
  sha256 BLOB NOT NULL UNIQUE,
  created_at TEXT NOT NULL,
  revoked_at TEXT
);
INSERT INTO tokens_0013 (id, principal_id, audience, sha256, created_at, revoked_at)
  SELECT id, principal_id, audience, sha256, created_at, revoked_at FROM tokens;
DROP TABLE tokens;
ALTER TABLE tokens_0013 RENAME TO tokens;
