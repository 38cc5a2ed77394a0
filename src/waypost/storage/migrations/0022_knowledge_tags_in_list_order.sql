-- Knowledge lists filtered by `tag`, in list order. knowledge_tags held only
-- (tag, knowledge_id), so SQLite took a tag's records and sorted them all
-- for one page: 47-205 ms at 100,000 records for tags 5,500-22,000 of them
-- hold (or, on an analyzed file, walked the project and looked each
-- record's tags up: 12-16 ms for a rare tag). Each tag row now carries what the list
-- filters and orders by, kept by the same triggers from the record's
-- current row, so a tagged page is one range of an index whatever the tag:
--   the table itself            tag, project, newest first (its primary key)
--   knowledge_tags_by_status    the same within one status
--   knowledge_tags_shared       tag, newest first, shared records only
DROP TRIGGER knowledge_tags_insert;
DROP TRIGGER knowledge_tags_update;
DROP TRIGGER knowledge_tags_delete;
DROP TABLE knowledge_tags;

CREATE TABLE knowledge_tags (
  tag TEXT NOT NULL,
  knowledge_id TEXT NOT NULL REFERENCES knowledge(id),
  project_id TEXT NOT NULL,
  status TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  shared INTEGER NOT NULL CHECK (shared IN (0, 1)),
  -- a record's tag once however often its list names it (INSERT OR IGNORE)
  PRIMARY KEY (tag, project_id, updated_at DESC, knowledge_id DESC)
) WITHOUT ROWID;
CREATE TRIGGER knowledge_tags_insert AFTER INSERT ON knowledge BEGIN
  INSERT OR IGNORE INTO knowledge_tags
    (tag, knowledge_id, project_id, status, updated_at, shared)
  SELECT value, new.id, new.project_id, new.status, new.updated_at,
         new.collection = 'shared'
  FROM json_each(new.tags);
END;
CREATE TRIGGER knowledge_tags_update
AFTER UPDATE OF tags, project_id, status, updated_at, collection ON knowledge BEGIN
  DELETE FROM knowledge_tags WHERE knowledge_id = old.id;
  INSERT OR IGNORE INTO knowledge_tags
    (tag, knowledge_id, project_id, status, updated_at, shared)
  SELECT value, new.id, new.project_id, new.status, new.updated_at,
         new.collection = 'shared'
  FROM json_each(new.tags);
END;
CREATE TRIGGER knowledge_tags_delete AFTER DELETE ON knowledge BEGIN
  DELETE FROM knowledge_tags WHERE knowledge_id = old.id;
END;

-- The rows of today's records, in key order (each page of the table written
-- once), and the indexes after them: 13.9 s -> 4.8 s at 200,000 records.
INSERT OR IGNORE INTO knowledge_tags (tag, knowledge_id, project_id, status, updated_at, shared)
SELECT t.value, k.id, k.project_id, k.status, k.updated_at, k.collection = 'shared'
FROM knowledge k, json_each(k.tags) t
ORDER BY t.value, k.project_id, k.updated_at DESC, k.id DESC;
CREATE INDEX knowledge_tags_by_record ON knowledge_tags (knowledge_id);
CREATE INDEX knowledge_tags_by_status
  ON knowledge_tags (tag, project_id, status, updated_at DESC, knowledge_id DESC);
CREATE INDEX knowledge_tags_shared
  ON knowledge_tags (tag, updated_at DESC, knowledge_id DESC) WHERE shared = 1;
