-- The partial index of reversible decisions (the sweep and the digest look
-- only at those), for files first migrated before 0004_decisions.sql gained
-- it; a no-op everywhere else (storage/migrate.py, EARLIER_TEXTS).
CREATE INDEX IF NOT EXISTS decisions_reversible ON decisions (id) WHERE reversible = 1;
