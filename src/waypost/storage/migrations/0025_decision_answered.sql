-- Whether a decision's current generation has an answer, as stored state
-- beside `held` (0014) and `stale` (0023), with the decision's project and
-- creation time so that the unanswered decisions of a project are one range
-- of a partial index, in list order. The digest's pending and timing-out
-- lists, the `pending` status filter and the sweep start there instead of
-- walking every decision of the project, or every reversible one: at 50,000
-- decisions the digest's pending list took 76 ms, its timing-out list 71 ms
-- with nothing due, and a sweep pass 32 ms. The history stays the
-- authority: `admin verify` (`gate_state`) holds these columns to
-- `decision_current`.
ALTER TABLE decision_holds ADD COLUMN answered INTEGER NOT NULL DEFAULT 0
  CHECK (answered IN (0, 1));
ALTER TABLE decision_holds ADD COLUMN project_id TEXT;
ALTER TABLE decision_holds ADD COLUMN created_at TEXT;

-- A new decision's row (0023's upsert) takes its project and creation time.
CREATE TRIGGER decision_holds_placed AFTER INSERT ON decision_holds
BEGIN
  UPDATE decision_holds SET (project_id, created_at) =
    (SELECT d.project_id, d.created_at FROM decisions d WHERE d.id = new.decision_id)
  WHERE decision_id = new.decision_id;
END;

-- An answer is always to the current generation.
CREATE TRIGGER decision_answered AFTER INSERT ON decision_answers
BEGIN
  UPDATE decision_holds SET answered = 1
  WHERE decision_id = new.decision_id AND generation = new.generation;
END;

-- A reopening moves the row to the new generation (0023's upsert), which
-- has no answer yet.
CREATE TRIGGER decision_answered_next_generation AFTER UPDATE OF generation ON decision_holds
WHEN new.generation IS NOT old.generation
BEGIN
  UPDATE decision_holds SET answered = 0 WHERE decision_id = new.decision_id;
END;

-- The decisions that exist already.
UPDATE decision_holds SET
  (project_id, created_at) =
    (SELECT d.project_id, d.created_at FROM decisions d WHERE d.id = decision_holds.decision_id),
  answered = EXISTS (
    SELECT 1 FROM decision_answers a
    WHERE a.decision_id = decision_holds.decision_id
      AND a.generation = decision_holds.generation);

CREATE INDEX decision_holds_unanswered ON decision_holds (project_id, created_at, decision_id)
  WHERE answered = 0;

-- A rules edit walked every decision of the project, twice for the gate and
-- once for `stale` (0014, 0023), inside the writer: 65-320 ms of every
-- project's write time at 1,000-50,000 decisions, even when no live allow
-- was left to change. It changes only the decisions still released
-- (`held = 0`) or still fresh (`stale = 0`), which a rules edit turns all
-- of; so each walk starts from those, a partial index of each per project.
CREATE INDEX decision_holds_released ON decision_holds (project_id) WHERE held = 0;
CREATE INDEX decision_holds_fresh ON decision_holds (project_id) WHERE stale = 0;

DROP TRIGGER decision_holds_rules_edit;
CREATE TRIGGER decision_holds_rules_edit AFTER UPDATE OF rules_revision ON projects
WHEN new.rules_revision > old.rules_revision
BEGIN
  UPDATE tasks SET gate_held = 1 WHERE gate_held = 0 AND (
    id IN (SELECT x.task_id FROM decision_holds h
           JOIN decision_generations g ON g.decision_id = h.decision_id
             AND g.generation = h.generation
           JOIN decision_affected x ON x.decision_id = h.decision_id
             AND x.generation = h.generation
           WHERE h.project_id = new.id AND h.held = 0
             AND g.policy_revision < new.rules_revision)
    OR subject_task_id IN (SELECT x.task_id FROM decision_holds h
           JOIN decision_generations g ON g.decision_id = h.decision_id
             AND g.generation = h.generation
           JOIN decision_affected x ON x.decision_id = h.decision_id
             AND x.generation = h.generation
           WHERE h.project_id = new.id AND h.held = 0
             AND g.policy_revision < new.rules_revision));
  UPDATE decision_holds SET held = 1
  WHERE project_id = new.id AND held = 0 AND (
    SELECT g.policy_revision FROM decision_generations g
    WHERE g.decision_id = decision_holds.decision_id
      AND g.generation = decision_holds.generation) < new.rules_revision;
END;

DROP TRIGGER decision_stale_rules_edit;
CREATE TRIGGER decision_stale_rules_edit AFTER UPDATE OF rules_revision ON projects
WHEN new.rules_revision > old.rules_revision
BEGIN
  UPDATE decision_holds SET stale = 1
  WHERE project_id = new.id AND stale = 0 AND (
    SELECT g.policy_revision FROM decision_generations g
    WHERE g.decision_id = decision_holds.decision_id
      AND g.generation = decision_holds.generation) < new.rules_revision;
END;
