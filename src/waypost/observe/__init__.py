"""Operators' view of a running service: request log lines and Prometheus metrics."""
