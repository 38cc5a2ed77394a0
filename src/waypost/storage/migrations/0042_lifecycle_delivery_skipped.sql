-- An event its receiver refuses for good held every later event back for
-- ever: the worker sends them in order, and the only way out was editing the
-- file by hand (note67). `waypost admin lifecycle skip` marks such a
-- delivery `skipped`: never sent, no longer ahead of the rest, with when and
-- why kept beside it. SQLite cannot change a CHECK constraint in place, so
-- the table is rebuilt with its rows, their ids and both indexes.
CREATE TABLE lifecycle_deliveries_next (
  event_sequence INTEGER PRIMARY KEY REFERENCES lifecycle_events (sequence),
  state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'skipped')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  last_attempt_at TEXT,
  delivered_at TEXT,
  delivery_id TEXT,
  skipped_at TEXT,
  skip_reason TEXT
);
INSERT INTO lifecycle_deliveries_next
  (event_sequence, state, attempts, last_error, last_attempt_at, delivered_at, delivery_id)
  SELECT event_sequence, state, attempts, last_error, last_attempt_at, delivered_at, delivery_id
  FROM lifecycle_deliveries;
DROP TABLE lifecycle_deliveries;
ALTER TABLE lifecycle_deliveries_next RENAME TO lifecycle_deliveries;
CREATE INDEX lifecycle_deliveries_pending ON lifecycle_deliveries (state, event_sequence);
CREATE UNIQUE INDEX lifecycle_deliveries_by_id ON lifecycle_deliveries (delivery_id);
