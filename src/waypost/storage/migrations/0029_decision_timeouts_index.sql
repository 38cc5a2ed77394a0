-- The sweep and the digest's `timing_out_soon` look for the few pending
-- decisions that can time out (reversible, not an agent-opened cycle of a
-- human-required question, not expiring first). They walked every
-- unanswered decision (0025's index), stale and expired ones included,
-- which stay unanswered until someone reopens them: 9.5-9.8 ms per sweep
-- pass and per digest at 50,000 such decisions with nothing due.
--
-- The stored state gains `timeout_opened_at`: when the current generation
-- opened, if it can time out, else NULL. It is fixed for a generation (a
-- decision's reversibility and required actor never change, nor does a
-- generation's opener, opening time or expiry), so it is set where the row
-- is placed and where a reopening moves it to a new generation. A
-- generation that expires no later than its timeout (24 hours after it
-- opened, decisions/timeouts.TIMEOUT; tests/test_decision_timeouts_index.py
-- holds the two together) is expired by the time the sweep could answer it,
-- so it is NULL too. Partial indexes of the unanswered, fresh ones in the
-- order the sweep answers them, over all projects and per project, hold
-- only what may still time out. The history stays the authority: `admin
-- verify` (`gate_state`) holds the column to `decision_current`.
ALTER TABLE decision_holds ADD COLUMN timeout_opened_at TEXT;

-- The opening time of generation `gen` of decision `id` if it can time out.
-- (Written out in each trigger: SQLite has no stored functions.)
DROP TRIGGER decision_holds_placed;
CREATE TRIGGER decision_holds_placed AFTER INSERT ON decision_holds
BEGIN
  UPDATE decision_holds SET
    (project_id, created_at) =
      (SELECT d.project_id, d.created_at FROM decisions d WHERE d.id = new.decision_id),
    timeout_opened_at = (
      SELECT g.at FROM decisions d JOIN decision_generations g
        ON g.decision_id = d.id AND g.generation = new.generation
      WHERE d.id = new.decision_id AND d.reversible = 1
        AND NOT (d.required_actor = 'human' AND g.actor_kind = 'agent')
        AND (g.expires_at IS NULL
             OR g.expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', g.at, '+86400 seconds')))
  WHERE decision_id = new.decision_id;
END;

DROP TRIGGER decision_answered_next_generation;
CREATE TRIGGER decision_answered_next_generation AFTER UPDATE OF generation ON decision_holds
WHEN new.generation IS NOT old.generation
BEGIN
  UPDATE decision_holds SET answered = 0, disposition = NULL,
    timeout_opened_at = (
      SELECT g.at FROM decisions d JOIN decision_generations g
        ON g.decision_id = d.id AND g.generation = new.generation
      WHERE d.id = new.decision_id AND d.reversible = 1
        AND NOT (d.required_actor = 'human' AND g.actor_kind = 'agent')
        AND (g.expires_at IS NULL
             OR g.expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', g.at, '+86400 seconds')))
  WHERE decision_id = new.decision_id;
END;

-- The decisions that exist already.
UPDATE decision_holds SET timeout_opened_at = (
  SELECT g.at FROM decisions d JOIN decision_generations g
    ON g.decision_id = d.id AND g.generation = decision_holds.generation
  WHERE d.id = decision_holds.decision_id AND d.reversible = 1
    AND NOT (d.required_actor = 'human' AND g.actor_kind = 'agent')
    AND (g.expires_at IS NULL
         OR g.expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', g.at, '+86400 seconds')));

CREATE INDEX decision_holds_timing_out ON decision_holds (timeout_opened_at, decision_id)
  WHERE answered = 0 AND stale = 0 AND timeout_opened_at IS NOT NULL;
CREATE INDEX decision_holds_timing_out_by_project
  ON decision_holds (project_id, timeout_opened_at, decision_id)
  WHERE answered = 0 AND stale = 0 AND timeout_opened_at IS NOT NULL;
