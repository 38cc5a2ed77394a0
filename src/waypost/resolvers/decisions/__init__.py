"""Decisions: open, answer, reopen, status from pins, the gate, timeouts, digest."""
