"""The async SQLite store. All SQL of the service lives under this package."""
