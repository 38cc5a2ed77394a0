-- Decisions: the stable question, its immutable generations (pins), the tasks
-- each generation affects at their pinned revisions, and at most one answer per
-- generation. Status is never stored: it is computed from the pins, the answer
-- and the service time (resolvers/decisions/status.py).

CREATE TABLE decisions (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL REFERENCES projects(id),
  question TEXT NOT NULL,
  options TEXT NOT NULL,                        -- JSON array of 2-20 unique strings
  rationale TEXT NOT NULL,
  required_actor TEXT NOT NULL CHECK (required_actor IN ('human', 'agent', 'either')),
  recommendation TEXT,
  reversible INTEGER NOT NULL CHECK (reversible IN (0, 1)),
  generation INTEGER NOT NULL,                  -- the current generation
  created_at TEXT NOT NULL,
  created_by TEXT NOT NULL REFERENCES principals(id),
  created_by_kind TEXT NOT NULL CHECK (created_by_kind IN ('human', 'agent')),
  CHECK (reversible = 0 OR recommendation IS NOT NULL)
);
CREATE INDEX decisions_by_project ON decisions (project_id, created_at, id);
-- the sweep and the digest look only at reversible decisions
CREATE INDEX decisions_reversible ON decisions (id) WHERE reversible = 1;

-- The question, options and required actor can never change (a reopening cannot
-- weaken a human requirement); the only move is to the next generation.
CREATE TRIGGER decisions_stable BEFORE UPDATE ON decisions
WHEN new.id IS NOT old.id OR new.project_id IS NOT old.project_id
  OR new.question IS NOT old.question OR new.options IS NOT old.options
  OR new.rationale IS NOT old.rationale OR new.required_actor IS NOT old.required_actor
  OR new.recommendation IS NOT old.recommendation OR new.reversible IS NOT old.reversible
  OR new.created_at IS NOT old.created_at OR new.created_by IS NOT old.created_by
  OR new.created_by_kind IS NOT old.created_by_kind
  OR new.generation IS NOT old.generation + 1
BEGIN SELECT RAISE(ABORT, 'a decision only moves to its next generation'); END;
CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'decisions are never deleted'); END;

CREATE TABLE decision_generations (
  decision_id TEXT NOT NULL REFERENCES decisions(id),
  generation INTEGER NOT NULL,
  policy_revision INTEGER NOT NULL,             -- pinned project policy revision
  environment TEXT NOT NULL,
  conditions TEXT NOT NULL,                     -- JSON array of strings
  expires_at TEXT,
  reopen_rationale TEXT,                        -- NULL for generation 1
  actor_id TEXT NOT NULL,                       -- who asked this cycle
  actor_kind TEXT NOT NULL CHECK (actor_kind IN ('human', 'agent')),
  actor_session_id TEXT,
  at TEXT NOT NULL,
  PRIMARY KEY (decision_id, generation)
) WITHOUT ROWID;
CREATE TRIGGER decision_generations_no_update BEFORE UPDATE ON decision_generations
BEGIN SELECT RAISE(ABORT, 'decision_generations rows are immutable'); END;
CREATE TRIGGER decision_generations_no_delete BEFORE DELETE ON decision_generations
BEGIN SELECT RAISE(ABORT, 'decision_generations rows are immutable'); END;

CREATE TABLE decision_affected (
  decision_id TEXT NOT NULL,
  generation INTEGER NOT NULL,
  position INTEGER NOT NULL,                    -- order the asker listed the tasks in
  task_id TEXT NOT NULL REFERENCES tasks(id),
  task_revision INTEGER NOT NULL,               -- the task revision this generation pins
  PRIMARY KEY (decision_id, generation, task_id),
  FOREIGN KEY (decision_id, generation) REFERENCES decision_generations (decision_id, generation)
) WITHOUT ROWID;
-- the gate looks decisions up by task
CREATE INDEX decision_affected_by_task ON decision_affected (task_id, decision_id, generation);
CREATE TRIGGER decision_affected_no_update BEFORE UPDATE ON decision_affected
BEGIN SELECT RAISE(ABORT, 'decision_affected rows are immutable'); END;
CREATE TRIGGER decision_affected_no_delete BEFORE DELETE ON decision_affected
BEGIN SELECT RAISE(ABORT, 'decision_affected rows are immutable'); END;

-- One answer per generation (the primary key): a second answer on the same
-- generation is refused with state_conflict before it reaches this table.
CREATE TABLE decision_answers (
  decision_id TEXT NOT NULL,
  generation INTEGER NOT NULL,
  disposition TEXT NOT NULL CHECK (disposition IN ('allow', 'deny', 'defer')),
  answer TEXT NOT NULL,
  rationale TEXT NOT NULL,
  conditions_confirmed INTEGER NOT NULL CHECK (conditions_confirmed IN (0, 1)),
  actor_id TEXT NOT NULL,
  actor_session_id TEXT,
  relayed INTEGER NOT NULL CHECK (relayed IN (0, 1)),
  relay_prompt TEXT,
  relay_response TEXT,
  authorized_by TEXT,
  relay_policy_revision INTEGER,
  timed_out INTEGER NOT NULL CHECK (timed_out IN (0, 1)),
  at TEXT NOT NULL,
  PRIMARY KEY (decision_id, generation),
  FOREIGN KEY (decision_id, generation) REFERENCES decision_generations (decision_id, generation),
  CHECK (disposition <> 'allow' OR conditions_confirmed = 1),
  CHECK (relayed = (relay_prompt IS NOT NULL))
) WITHOUT ROWID;
CREATE INDEX decision_answers_timed_out ON decision_answers (at) WHERE timed_out = 1;
CREATE TRIGGER decision_answers_no_update BEFORE UPDATE ON decision_answers
BEGIN SELECT RAISE(ABORT, 'decision_answers rows are immutable'); END;
CREATE TRIGGER decision_answers_no_delete BEFORE DELETE ON decision_answers
BEGIN SELECT RAISE(ABORT, 'decision_answers rows are immutable'); END;

-- The inputs of a decision's current status, one row per decision. `stale` is
-- the pin rule: a judged-field edit of an affected task since its pinned
-- revision, or a rules-text change since the pinned policy revision. Priority,
-- dependency, lease and review-mode edits move neither judged_revision nor
-- rules_revision, so they never make a decision stale.
CREATE VIEW decision_current AS
SELECT
  d.id AS decision_id,
  d.project_id,
  d.generation,
  d.created_at,
  d.required_actor,
  d.reversible,
  d.recommendation,
  g.expires_at,
  g.at AS opened_at,
  g.actor_id AS opened_by,
  g.actor_kind AS opened_by_kind,
  a.disposition,
  a.at AS answered_at,
  (p.rules_revision > g.policy_revision OR EXISTS (
     SELECT 1 FROM decision_affected x JOIN tasks t ON t.id = x.task_id
     WHERE x.decision_id = d.id AND x.generation = d.generation
       AND t.judged_revision > x.task_revision)) AS stale
FROM decisions d
JOIN decision_generations g ON g.decision_id = d.id AND g.generation = d.generation
JOIN projects p ON p.id = d.project_id
LEFT JOIN decision_answers a ON a.decision_id = d.id AND a.generation = d.generation;
