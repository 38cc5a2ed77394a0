-- The tasks a decision may hold back, in claim order, for the digest's
-- `blocked_tasks`. Without it the digest walked every task of the project to
-- find the few that are blocked (40 ms at 100k tasks, none of them blocked).
-- A task is in it while its stored gate is held or carries an expiry: the
-- blocked set at any instant is a subset, which the query then filters.
CREATE INDEX tasks_gate_blocked ON tasks (project_id, priority DESC, created_at, id)
  WHERE gate_held <> 0 OR gate_expires IS NOT NULL;
