"""Waypost: a coordination service for teams of AI agents and humans."""

__version__ = "0.1.0"
