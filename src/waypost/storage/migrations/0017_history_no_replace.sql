-- History rows cannot be replaced either.
--
-- Each history table's triggers refuse UPDATE and DELETE, but `INSERT OR
-- REPLACE` (or `REPLACE`) of an existing key deleted the old row without
-- firing its delete trigger (SQLite fires delete triggers for a REPLACE only
-- under `PRAGMA recursive_triggers`, which is per connection) and rewrote
-- it. A row whose key is already taken is now refused before the insert, on
-- every connection, whoever issues it. An ordinary duplicate insert, which
-- the primary key refused before, is refused by this trigger first.

CREATE TRIGGER decision_affected_no_replace BEFORE INSERT ON decision_affected
  WHEN EXISTS (SELECT 1 FROM decision_affected WHERE decision_id = new.decision_id AND generation = new.generation AND task_id = new.task_id)
BEGIN SELECT RAISE(ABORT, 'decision_affected rows are immutable'); END;
CREATE TRIGGER decision_answers_no_replace BEFORE INSERT ON decision_answers
  WHEN EXISTS (SELECT 1 FROM decision_answers WHERE decision_id = new.decision_id AND generation = new.generation)
BEGIN SELECT RAISE(ABORT, 'decision_answers rows are immutable'); END;
CREATE TRIGGER decision_generations_no_replace BEFORE INSERT ON decision_generations
  WHEN EXISTS (SELECT 1 FROM decision_generations WHERE decision_id = new.decision_id AND generation = new.generation)
BEGIN SELECT RAISE(ABORT, 'decision_generations rows are immutable'); END;
CREATE TRIGGER decisions_no_replace BEFORE INSERT ON decisions
  WHEN EXISTS (SELECT 1 FROM decisions WHERE id = new.id)
BEGIN SELECT RAISE(ABORT, 'decisions rows are immutable'); END;
CREATE TRIGGER events_no_replace BEFORE INSERT ON events
  WHEN EXISTS (SELECT 1 FROM events WHERE sequence = new.sequence)
BEGIN SELECT RAISE(ABORT, 'events rows are immutable'); END;
CREATE TRIGGER knowledge_feedback_no_replace BEFORE INSERT ON knowledge_feedback
  WHEN EXISTS (SELECT 1 FROM knowledge_feedback WHERE id = new.id)
BEGIN SELECT RAISE(ABORT, 'knowledge_feedback rows are immutable'); END;
CREATE TRIGGER knowledge_revisions_no_replace BEFORE INSERT ON knowledge_revisions
  WHEN EXISTS (SELECT 1 FROM knowledge_revisions WHERE knowledge_id = new.knowledge_id AND revision = new.revision)
BEGIN SELECT RAISE(ABORT, 'knowledge_revisions rows are immutable'); END;
CREATE TRIGGER lifecycle_documents_no_replace BEFORE INSERT ON lifecycle_documents
  WHEN EXISTS (SELECT 1 FROM lifecycle_documents WHERE tenant = new.tenant AND memo_id = new.memo_id AND digest = new.digest)
BEGIN SELECT RAISE(ABORT, 'lifecycle_documents rows are immutable'); END;
CREATE TRIGGER lifecycle_events_no_replace BEFORE INSERT ON lifecycle_events
  WHEN EXISTS (SELECT 1 FROM lifecycle_events WHERE sequence = new.sequence)
BEGIN SELECT RAISE(ABORT, 'lifecycle_events rows are immutable'); END;
CREATE TRIGGER lifecycle_outcomes_no_replace BEFORE INSERT ON lifecycle_outcomes
  WHEN EXISTS (SELECT 1 FROM lifecycle_outcomes WHERE request_id = new.request_id AND reviewer = new.reviewer)
BEGIN SELECT RAISE(ABORT, 'lifecycle_outcomes rows are immutable'); END;
CREATE TRIGGER lifecycle_review_requests_no_replace BEFORE INSERT ON lifecycle_review_requests
  WHEN EXISTS (SELECT 1 FROM lifecycle_review_requests WHERE id = new.id)
BEGIN SELECT RAISE(ABORT, 'lifecycle_review_requests rows are immutable'); END;
CREATE TRIGGER lifecycle_revisions_no_replace BEFORE INSERT ON lifecycle_revisions
  WHEN EXISTS (SELECT 1 FROM lifecycle_revisions WHERE tenant = new.tenant AND memo_id = new.memo_id AND version = new.version)
BEGIN SELECT RAISE(ABORT, 'lifecycle_revisions rows are immutable'); END;
CREATE TRIGGER policy_revisions_no_replace BEFORE INSERT ON policy_revisions
  WHEN EXISTS (SELECT 1 FROM policy_revisions WHERE project_id = new.project_id AND revision = new.revision)
BEGIN SELECT RAISE(ABORT, 'policy_revisions rows are immutable'); END;
CREATE TRIGGER submissions_no_replace BEFORE INSERT ON submissions
  WHEN EXISTS (SELECT 1 FROM submissions WHERE id = new.id)
BEGIN SELECT RAISE(ABORT, 'submissions rows are immutable'); END;
CREATE TRIGGER task_checkpoints_no_replace BEFORE INSERT ON task_checkpoints
  WHEN EXISTS (SELECT 1 FROM task_checkpoints WHERE id = new.id)
BEGIN SELECT RAISE(ABORT, 'task_checkpoints rows are immutable'); END;
CREATE TRIGGER task_revisions_no_replace BEFORE INSERT ON task_revisions
  WHEN EXISTS (SELECT 1 FROM task_revisions WHERE task_id = new.task_id AND revision = new.revision)
BEGIN SELECT RAISE(ABORT, 'task_revisions rows are immutable'); END;
