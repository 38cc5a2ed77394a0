"""Principals, tokens and agent sessions."""
