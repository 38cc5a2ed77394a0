"""Benchmarks for Waypost; run `python -m bench` (or `make bench`)."""
