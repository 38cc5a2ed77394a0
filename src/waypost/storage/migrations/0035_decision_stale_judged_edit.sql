-- 0023's judged-edit trigger as it ships, for files that applied its first
-- text (build 42e651c, on main for two minutes of 2026-12-02): there it
-- matched the pins by a row-value IN, which walked every decision on each
-- task edit (0.21 ms at 3,200 decisions); the same decisions go stale
-- either way. Those texts are accepted
-- (storage/schema_guard.EARLIER_TEXTS), and the trigger is made again here
-- so that every file holds the same one. On any other file this replaces
-- the trigger with itself.
DROP TRIGGER decision_stale_judged_edit;
CREATE TRIGGER decision_stale_judged_edit AFTER UPDATE OF judged_revision ON tasks
WHEN new.judged_revision > old.judged_revision
BEGIN
  UPDATE decision_holds SET stale = 1 WHERE stale = 0 AND decision_id IN (
    SELECT x.decision_id FROM decision_affected x
    WHERE x.task_id = new.id AND x.task_revision < new.judged_revision
      AND x.generation = (SELECT h.generation FROM decision_holds h
                          WHERE h.decision_id = x.decision_id));
END;
