-- Each status filter of the decision lists walks the decisions of that
-- status, in list order, not the project's decisions. 0025 did it for
-- `pending`; the others (`allowed`, `denied`, `deferred`, `stale`,
-- `expired`) walked every decision of the project until they found a page,
-- so a status few decisions hold cost a walk of the whole project.
--
-- The stored state gains the current generation's disposition (kept by the
-- triggers that keep `answered`), and three partial indexes in list order:
-- the fresh answered decisions by disposition, the stale ones, and those
-- with an expiry (an expired decision is one of them). The history stays
-- the authority: `admin verify` (`gate_state`) holds `disposition` to
-- `decision_current` as it does the other columns.
ALTER TABLE decision_holds ADD COLUMN disposition TEXT
  CHECK (disposition IN ('allow', 'deny', 'defer'));

DROP TRIGGER decision_answered;
CREATE TRIGGER decision_answered AFTER INSERT ON decision_answers
BEGIN
  UPDATE decision_holds SET answered = 1, disposition = new.disposition
  WHERE decision_id = new.decision_id AND generation = new.generation;
END;

DROP TRIGGER decision_answered_next_generation;
CREATE TRIGGER decision_answered_next_generation AFTER UPDATE OF generation ON decision_holds
WHEN new.generation IS NOT old.generation
BEGIN
  UPDATE decision_holds SET answered = 0, disposition = NULL
  WHERE decision_id = new.decision_id;
END;

-- The decisions that exist already.
UPDATE decision_holds SET disposition = (
  SELECT a.disposition FROM decision_answers a
  WHERE a.decision_id = decision_holds.decision_id
    AND a.generation = decision_holds.generation);

CREATE INDEX decision_holds_answered
  ON decision_holds (project_id, disposition, created_at, decision_id)
  WHERE answered = 1 AND stale = 0;
CREATE INDEX decision_holds_stale ON decision_holds (project_id, created_at, decision_id)
  WHERE stale = 1;
CREATE INDEX decision_holds_expiring ON decision_holds (project_id, created_at, decision_id)
  WHERE expires_at IS NOT NULL;
