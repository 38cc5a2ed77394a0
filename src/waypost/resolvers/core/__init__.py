"""Receipts, events and the periodic sweep: what every mutation shares."""
