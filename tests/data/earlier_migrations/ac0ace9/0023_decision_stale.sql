-- The stale half of a decision's status as stored state, beside the gate's
-- `held` (migration 0014): 1 when a judged edit of a task its current
-- generation pins, or a rules edit, came after the revision it pinned. It
-- only ever turns 1 within a generation (revisions only grow), and a new
-- generation starts from its own pins. Status filters and counts read it
-- (lists_store.py) where they compared every decision's pins: a count of
-- one status took 11-16 ms at 3,200 decisions. The history stays the
-- authority: `decision_current.stale` derives the same flag, the gate reads
-- that, and `admin verify` (`gate_state`) holds the two together.
ALTER TABLE decision_holds ADD COLUMN stale INTEGER NOT NULL DEFAULT 0 CHECK (stale IN (0, 1));

-- A new current generation: stale when it pinned an older policy revision
-- than the project's rules (its task pins follow, below). 0014's trigger,
-- with that column.
DROP TRIGGER decision_holds_generation;
CREATE TRIGGER decision_holds_generation AFTER INSERT ON decision_generations
WHEN new.generation = (SELECT generation FROM decisions WHERE id = new.decision_id)
BEGIN
  INSERT INTO decision_holds (decision_id, generation, held, expires_at, stale)
    VALUES (new.decision_id, new.generation, 1, new.expires_at,
            new.policy_revision < (SELECT p.rules_revision FROM projects p
                                   JOIN decisions d ON d.project_id = p.id
                                   WHERE d.id = new.decision_id))
    ON CONFLICT (decision_id) DO UPDATE SET
      generation = excluded.generation, held = 1, expires_at = excluded.expires_at,
      stale = excluded.stale;
  INSERT INTO task_gate_refresh (task_id)
    SELECT task_id FROM decision_affected
    WHERE decision_id = new.decision_id AND generation = new.generation - 1;
END;

-- A pin of the current generation older than its task's judged revision.
CREATE TRIGGER decision_stale_pin AFTER INSERT ON decision_affected
WHEN new.task_revision < (SELECT judged_revision FROM tasks WHERE id = new.task_id)
BEGIN
  UPDATE decision_holds SET stale = 1
  WHERE decision_id = new.decision_id AND generation = new.generation;
END;

-- A judged edit: every current generation pinning an older revision of the
-- task. `decision_id IN (...)` looks each one up by key (a row-value IN
-- walked every decision: 0.21 ms per task edit at 3,200 decisions).
CREATE TRIGGER decision_stale_judged_edit AFTER UPDATE OF judged_revision ON tasks
WHEN new.judged_revision > old.judged_revision
BEGIN
  UPDATE decision_holds SET stale = 1 WHERE stale = 0 AND decision_id IN (
    SELECT x.decision_id FROM decision_affected x
    WHERE x.task_id = new.id AND x.task_revision < new.judged_revision
      AND x.generation = (SELECT h.generation FROM decision_holds h
                          WHERE h.decision_id = x.decision_id));
END;

-- A rules edit: every current generation of the project pinned to an older
-- policy revision.
CREATE TRIGGER decision_stale_rules_edit AFTER UPDATE OF rules_revision ON projects
WHEN new.rules_revision > old.rules_revision
BEGIN
  UPDATE decision_holds SET stale = 1 WHERE stale = 0 AND decision_id IN (
    SELECT d.id FROM decisions d
    JOIN decision_generations g ON g.decision_id = d.id AND g.generation = d.generation
    WHERE d.project_id = new.id AND g.policy_revision < new.rules_revision);
END;

-- The decisions that exist already.
UPDATE decision_holds SET stale = coalesce(
  (SELECT s.stale FROM decision_current s WHERE s.decision_id = decision_holds.decision_id), 0);
