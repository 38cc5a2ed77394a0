"""Tasks, their revisions, leases, submissions, publication and readiness."""
