-- The decision gate as stored state, so that a claim skips blocked work inside
-- an index instead of deriving the blocked set on every claim (issue 8).
--
-- A decision's status (resolvers/decisions/status.py) is `allowed` exactly
-- when its current generation has an `allow` answer, is not stale, and its
-- `expires_at` has not passed. The first two parts change only by writes
-- (an answer, a reopening, a judged task edit, a rules edit; a stale pin can
-- never become fresh again, since revisions only grow); only the expiry
-- changes with the mere passing of time. So the store keeps:
--
--   decision_holds.held     1 when the current generation blocks whatever
--                           the time (no allow answer, or stale), else 0
--   decision_holds.expires_at  the current generation's expiry
--   tasks.gate_held         1 when a decision held as above affects the task
--                           or, for an activity, its subject
--   tasks.gate_expires      the earliest expiry among the current
--                           generations affecting the task or its subject
--
-- and a task passes the gate at time `now` exactly when
-- `gate_held = 0 AND (gate_expires IS NULL OR gate_expires > now)`:
-- a decision blocks iff it is held or expired, and some decision is expired
-- iff the earliest expiry has passed. Nothing is stored about `now`, so a
-- clock that moves (or a test clock moved back) never leaves it wrong.
--
-- The triggers below keep both exact inside the transaction that makes the
-- change, whichever code path writes the rows (API, sweep, bench seeding).
-- The gate itself (`ensure_decisions_resolved`) still derives the status from
-- the history and stays the authority; the claim re-checks its pick with it.

CREATE TABLE decision_holds (
  decision_id TEXT PRIMARY KEY REFERENCES decisions(id),
  generation INTEGER NOT NULL,                  -- the decision's current generation
  held INTEGER NOT NULL CHECK (held IN (0, 1)),
  expires_at TEXT
) WITHOUT ROWID;

ALTER TABLE tasks ADD COLUMN gate_held INTEGER NOT NULL DEFAULT 0 CHECK (gate_held IN (0, 1));
ALTER TABLE tasks ADD COLUMN gate_expires TEXT;

-- What an ordinary claim walks: open, unleased tasks that no held decision
-- blocks, in claim order. Blocked tasks are not in it at all, so a claim costs
-- the same however many sit ahead. `gate_expires` rides along so that the
-- expiry test reads the index entry, not the row.
CREATE INDEX tasks_claimable ON tasks (project_id, priority DESC, created_at, id, gate_expires)
  WHERE status = 'open' AND lease_owner_id IS NULL AND gate_held = 0;
-- The same set in creation order, for `ready=true` task lists.
CREATE INDEX tasks_ready_by_created ON tasks (project_id, created_at, id, gate_expires)
  WHERE status = 'open' AND lease_owner_id IS NULL AND gate_held = 0;

-- A procedure, in the usual SQLite idiom (an INSTEAD OF trigger on a view):
-- `INSERT INTO task_gate_refresh (task_id) ...` recomputes the gate columns of
-- each named task and of its activities from decision_holds. One definition,
-- used by every trigger that can turn a task's gate from held to open.
CREATE VIEW task_gate_refresh AS SELECT id AS task_id FROM tasks WHERE 0;
CREATE TRIGGER task_gate_refresh_run INSTEAD OF INSERT ON task_gate_refresh
BEGIN
  UPDATE tasks SET
    gate_held = EXISTS (
      SELECT 1 FROM decision_affected x JOIN decision_holds h
        ON h.decision_id = x.decision_id AND h.generation = x.generation
      WHERE x.task_id IN (tasks.id, tasks.subject_task_id) AND h.held = 1),
    gate_expires = (
      SELECT MIN(h.expires_at) FROM decision_affected x JOIN decision_holds h
        ON h.decision_id = x.decision_id AND h.generation = x.generation
      WHERE x.task_id IN (tasks.id, tasks.subject_task_id))
  WHERE id = new.task_id OR subject_task_id = new.task_id;
END;

-- A new current generation (open or reopen) has no answer yet: it holds. The
-- previous generation's pins stop counting, so its tasks are recomputed (the
-- new generation's pins, inserted next, hold them again).
CREATE TRIGGER decision_holds_generation AFTER INSERT ON decision_generations
WHEN new.generation = (SELECT generation FROM decisions WHERE id = new.decision_id)
BEGIN
  INSERT INTO decision_holds (decision_id, generation, held, expires_at)
    VALUES (new.decision_id, new.generation, 1, new.expires_at)
    ON CONFLICT (decision_id) DO UPDATE SET
      generation = excluded.generation, held = 1, expires_at = excluded.expires_at;
  INSERT INTO task_gate_refresh (task_id)
    SELECT task_id FROM decision_affected
    WHERE decision_id = new.decision_id AND generation = new.generation - 1;
END;

-- A pin of the current generation: its task (and activities) take it into account.
CREATE TRIGGER decision_holds_affected AFTER INSERT ON decision_affected
WHEN EXISTS (SELECT 1 FROM decision_holds
             WHERE decision_id = new.decision_id AND generation = new.generation)
BEGIN
  INSERT INTO task_gate_refresh (task_id) VALUES (new.task_id);
END;

-- An answer on the current generation: only a fresh (not stale) allow releases
-- the hold; then every task it pins is recomputed (another decision may
-- still hold it).
CREATE TRIGGER decision_holds_answer AFTER INSERT ON decision_answers
WHEN EXISTS (SELECT 1 FROM decision_holds
             WHERE decision_id = new.decision_id AND generation = new.generation)
BEGIN
  UPDATE decision_holds SET held = (new.disposition IS NOT 'allow' OR
    (SELECT s.stale FROM decision_current s WHERE s.decision_id = new.decision_id))
  WHERE decision_id = new.decision_id;
  INSERT INTO task_gate_refresh (task_id)
    SELECT x.task_id FROM decision_affected x JOIN decision_holds h
      ON h.decision_id = x.decision_id AND h.generation = x.generation
    WHERE x.decision_id = new.decision_id AND h.held = 0;
END;

-- A judged edit makes every live allow pinning an older revision of the task
-- stale. Stale only ever adds a hold, so the tasks those decisions pin (and
-- their activities) are set held directly, before the decisions are marked.
CREATE TRIGGER decision_holds_judged_edit AFTER UPDATE OF judged_revision ON tasks
WHEN new.judged_revision > old.judged_revision
BEGIN
  UPDATE tasks SET gate_held = 1 WHERE gate_held = 0 AND (
    id IN (SELECT y.task_id FROM decision_affected x
           JOIN decision_holds h ON h.decision_id = x.decision_id
             AND h.generation = x.generation AND h.held = 0
           JOIN decision_affected y ON y.decision_id = x.decision_id
             AND y.generation = x.generation
           WHERE x.task_id = new.id AND x.task_revision < new.judged_revision)
    OR subject_task_id IN (SELECT y.task_id FROM decision_affected x
           JOIN decision_holds h ON h.decision_id = x.decision_id
             AND h.generation = x.generation AND h.held = 0
           JOIN decision_affected y ON y.decision_id = x.decision_id
             AND y.generation = x.generation
           WHERE x.task_id = new.id AND x.task_revision < new.judged_revision));
  UPDATE decision_holds SET held = 1 WHERE held = 0 AND (decision_id, generation) IN (
    SELECT x.decision_id, x.generation FROM decision_affected x
    WHERE x.task_id = new.id AND x.task_revision < new.judged_revision);
END;

-- A rules edit makes every live allow of the project pinned to an older
-- policy revision stale; same shape as a judged edit.
CREATE TRIGGER decision_holds_rules_edit AFTER UPDATE OF rules_revision ON projects
WHEN new.rules_revision > old.rules_revision
BEGIN
  UPDATE tasks SET gate_held = 1 WHERE gate_held = 0 AND (
    id IN (SELECT x.task_id FROM decisions d
           JOIN decision_holds h ON h.decision_id = d.id AND h.held = 0
           JOIN decision_generations g ON g.decision_id = h.decision_id
             AND g.generation = h.generation
           JOIN decision_affected x ON x.decision_id = h.decision_id
             AND x.generation = h.generation
           WHERE d.project_id = new.id AND g.policy_revision < new.rules_revision)
    OR subject_task_id IN (SELECT x.task_id FROM decisions d
           JOIN decision_holds h ON h.decision_id = d.id AND h.held = 0
           JOIN decision_generations g ON g.decision_id = h.decision_id
             AND g.generation = h.generation
           JOIN decision_affected x ON x.decision_id = h.decision_id
             AND x.generation = h.generation
           WHERE d.project_id = new.id AND g.policy_revision < new.rules_revision));
  UPDATE decision_holds SET held = 1 WHERE held = 0 AND decision_id IN (
    SELECT d.id FROM decisions d
    JOIN decision_generations g ON g.decision_id = d.id AND g.generation = d.generation
    WHERE d.project_id = new.id AND g.policy_revision < new.rules_revision);
END;

-- An activity takes its subject's decisions into account from the start.
CREATE TRIGGER task_gate_insert AFTER INSERT ON tasks
WHEN new.subject_task_id IS NOT NULL
BEGIN
  INSERT INTO task_gate_refresh (task_id) VALUES (new.id);
END;
CREATE TRIGGER task_gate_subject AFTER UPDATE OF subject_task_id ON tasks
WHEN new.subject_task_id IS NOT old.subject_task_id
BEGIN
  INSERT INTO task_gate_refresh (task_id) VALUES (new.id);
END;

-- The state of the rows that exist already.
INSERT INTO decision_holds (decision_id, generation, held, expires_at)
  SELECT decision_id, generation, (disposition IS NOT 'allow' OR stale), expires_at
  FROM decision_current;
INSERT INTO task_gate_refresh (task_id)
  SELECT DISTINCT x.task_id FROM decision_affected x JOIN decision_holds h
    ON h.decision_id = x.decision_id AND h.generation = x.generation;
