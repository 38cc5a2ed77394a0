-- What 0030 and 0031 left undone, in a migration of its own: files may have
-- been migrated with those two as they are, and a shipped migration never
-- changes. (Both were edited in place for a few minutes of 2026-12-03 on
-- main, to do what this one does; a file that applied those texts is
-- accepted (storage/schema_guard.EARLIER_TEXTS) and brought level here,
-- hence IF EXISTS.)
--
-- 1. The answers' own index of timeouts (0004), over every project, which
--    the planner never chose for the digest's list (0030 reads the sweep's
--    events instead) and nothing else reads.
DROP INDEX IF EXISTS decision_answers_timed_out;

-- 2. `task_decisions` rows follow 0017's rule, as every table whose triggers
--    refuse UPDATE and DELETE does: a row is never replaced. The trigger
--    that writes them then skips a taken key itself (a reopening's pins name
--    the decision's tasks again), instead of `INSERT OR IGNORE`, which the
--    refusal would turn into an error.
DROP TRIGGER task_decisions_pinned;
CREATE TRIGGER task_decisions_pinned AFTER INSERT ON decision_affected
BEGIN
  INSERT INTO task_decisions (task_id, created_at, decision_id)
    SELECT new.task_id, d.created_at, d.id FROM decisions d
    WHERE d.id = new.decision_id AND NOT EXISTS (SELECT 1 FROM task_decisions x
      WHERE x.task_id = new.task_id AND x.created_at = d.created_at
        AND x.decision_id = d.id);
END;
DROP TRIGGER IF EXISTS task_decisions_no_replace;
CREATE TRIGGER task_decisions_no_replace BEFORE INSERT ON task_decisions
  WHEN EXISTS (SELECT 1 FROM task_decisions WHERE task_id = new.task_id
    AND created_at = new.created_at AND decision_id = new.decision_id)
BEGIN SELECT RAISE(ABORT, 'task_decisions rows are immutable'); END;
