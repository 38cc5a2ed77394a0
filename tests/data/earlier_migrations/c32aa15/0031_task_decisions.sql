-- GraphQL's `Task.decisions` (every decision that ever affected a task,
-- newest first) looked up each of the task's pins, every generation's, read
-- each decision and numbered them all to keep a page: 41 ms at 20,000
-- decisions on one task. A decision's tasks are fixed when it opens (a
-- reopening pins the same tasks again), so each task's decisions in list
-- order are kept as rows of their own, written by a trigger as a pin is;
-- a page is then a LIMIT on one range. Like the pins, the rows never
-- change; `admin verify` (`task_decisions`) holds them to the pins.
CREATE TABLE task_decisions (
  task_id TEXT NOT NULL,
  created_at TEXT NOT NULL,                     -- the decision's
  decision_id TEXT NOT NULL,
  PRIMARY KEY (task_id, created_at, decision_id)
) WITHOUT ROWID;

-- A reopening's pins name the decision's tasks again: their rows exist.
CREATE TRIGGER task_decisions_pinned AFTER INSERT ON decision_affected
BEGIN
  INSERT INTO task_decisions (task_id, created_at, decision_id)
    SELECT new.task_id, d.created_at, d.id FROM decisions d
    WHERE d.id = new.decision_id AND NOT EXISTS (SELECT 1 FROM task_decisions x
      WHERE x.task_id = new.task_id AND x.created_at = d.created_at
        AND x.decision_id = d.id);
END;
-- (0017's rule: a row is never replaced)
CREATE TRIGGER task_decisions_no_update BEFORE UPDATE ON task_decisions
BEGIN SELECT RAISE(ABORT, 'task_decisions rows are immutable'); END;
CREATE TRIGGER task_decisions_no_delete BEFORE DELETE ON task_decisions
BEGIN SELECT RAISE(ABORT, 'task_decisions rows are immutable'); END;
CREATE TRIGGER task_decisions_no_replace BEFORE INSERT ON task_decisions
  WHEN EXISTS (SELECT 1 FROM task_decisions WHERE task_id = new.task_id
    AND created_at = new.created_at AND decision_id = new.decision_id)
BEGIN SELECT RAISE(ABORT, 'task_decisions rows are immutable'); END;

-- The decisions that exist already.
INSERT INTO task_decisions (task_id, created_at, decision_id)
  SELECT DISTINCT a.task_id, d.created_at, d.id
  FROM decision_affected a JOIN decisions d ON d.id = a.decision_id;
