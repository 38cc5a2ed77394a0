"""The SQLite engine: connections, the writer, the readers, migrations.

No domain knowledge lives here: each domain's SQL is in its own store
modules under `resolvers/` (tests/test_store_modules.py keeps it there)."""
