-- History tables with a TEXT primary key keep a hidden rowid too.
--
-- Migration 0017's triggers on these tables checked the `id` alone, so a
-- REPLACE that named an existing rowid with a new id still deleted the old
-- row (no trigger fires for it) and wrote another in its place. The
-- triggers now refuse a taken id or a taken rowid. (In a BEFORE INSERT
-- trigger new.rowid is -1 when the rowid is left to SQLite, which no row has.)
DROP TRIGGER decisions_no_replace;
DROP TRIGGER knowledge_feedback_no_replace;
DROP TRIGGER lifecycle_review_requests_no_replace;
DROP TRIGGER submissions_no_replace;
DROP TRIGGER task_checkpoints_no_replace;
CREATE TRIGGER decisions_no_replace BEFORE INSERT ON decisions
  WHEN EXISTS (SELECT 1 FROM decisions WHERE id = new.id OR rowid = new.rowid)
BEGIN SELECT RAISE(ABORT, 'decisions rows are immutable'); END;
CREATE TRIGGER knowledge_feedback_no_replace BEFORE INSERT ON knowledge_feedback
  WHEN EXISTS (SELECT 1 FROM knowledge_feedback WHERE id = new.id OR rowid = new.rowid)
BEGIN SELECT RAISE(ABORT, 'knowledge_feedback rows are immutable'); END;
CREATE TRIGGER lifecycle_review_requests_no_replace BEFORE INSERT ON lifecycle_review_requests
  WHEN EXISTS (SELECT 1 FROM lifecycle_review_requests WHERE id = new.id OR rowid = new.rowid)
BEGIN SELECT RAISE(ABORT, 'lifecycle_review_requests rows are immutable'); END;
CREATE TRIGGER submissions_no_replace BEFORE INSERT ON submissions
  WHEN EXISTS (SELECT 1 FROM submissions WHERE id = new.id OR rowid = new.rowid)
BEGIN SELECT RAISE(ABORT, 'submissions rows are immutable'); END;
CREATE TRIGGER task_checkpoints_no_replace BEFORE INSERT ON task_checkpoints
  WHEN EXISTS (SELECT 1 FROM task_checkpoints WHERE id = new.id OR rowid = new.rowid)
BEGIN SELECT RAISE(ABORT, 'task_checkpoints rows are immutable'); END;
