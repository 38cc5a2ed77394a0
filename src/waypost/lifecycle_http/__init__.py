"""The private lifecycle listener: its app, verifiers and error envelope."""

from __future__ import annotations

from waypost.lifecycle_http.app import create_lifecycle_app

__all__ = ["create_lifecycle_app"]
