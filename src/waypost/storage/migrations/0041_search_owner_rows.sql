-- How many of each searched table's rows each owner holds, kept by triggers
-- in the transaction of each write, so that a packet's search knows in one
-- probe whether a project's rows are few beside the whole table's and can
-- be asked for alone (resolvers/context/ranking_store.py).
--
-- Until now that share was counted through the index on each packet, up to
-- 1,000 rows (about 90 us): a project of 3,000 tasks among 53,000 was past
-- that bound and had the matches of the whole file ranked, 946 ms for
-- `billing` where its own rows alone took 156 ms (scalejourney).
--
-- `owner` is a project's id, `*` for the whole table, or `*shared` for the
-- records shared across projects (a project id is a slug: it never starts
-- with `*`). No row is deleted today and no record changes its project or
-- collection, but the triggers follow both, as the search indexes do.

CREATE TABLE search_owner_rows (
  content TEXT NOT NULL CHECK (content IN ('tasks', 'knowledge')),
  owner TEXT NOT NULL,
  row_count INTEGER NOT NULL CHECK (row_count >= 0),
  PRIMARY KEY (content, owner)
) WITHOUT ROWID;

INSERT INTO search_owner_rows (content, owner, row_count)
  SELECT 'tasks', project_id, count(*) FROM tasks GROUP BY project_id
  UNION ALL SELECT 'tasks', '*', count(*) FROM tasks
  UNION ALL SELECT 'knowledge', project_id, count(*) FROM knowledge GROUP BY project_id
  UNION ALL SELECT 'knowledge', '*', count(*) FROM knowledge
  UNION ALL SELECT 'knowledge', '*shared', count(*) FROM knowledge WHERE collection = 'shared';

CREATE TRIGGER tasks_owner_rows_insert AFTER INSERT ON tasks BEGIN
  INSERT INTO search_owner_rows (content, owner, row_count)
    VALUES ('tasks', new.project_id, 1), ('tasks', '*', 1)
    ON CONFLICT DO UPDATE SET row_count = row_count + 1;
END;
CREATE TRIGGER tasks_owner_rows_delete AFTER DELETE ON tasks BEGIN
  UPDATE search_owner_rows SET row_count = row_count - 1
    WHERE content = 'tasks' AND owner IN (old.project_id, '*');
END;
CREATE TRIGGER tasks_owner_rows_update AFTER UPDATE OF project_id ON tasks
WHEN new.project_id IS NOT old.project_id BEGIN
  UPDATE search_owner_rows SET row_count = row_count - 1
    WHERE content = 'tasks' AND owner = old.project_id;
  INSERT INTO search_owner_rows (content, owner, row_count)
    VALUES ('tasks', new.project_id, 1)
    ON CONFLICT DO UPDATE SET row_count = row_count + 1;
END;

CREATE TRIGGER knowledge_owner_rows_insert AFTER INSERT ON knowledge BEGIN
  INSERT INTO search_owner_rows (content, owner, row_count)
    VALUES ('knowledge', new.project_id, 1), ('knowledge', '*', 1)
    ON CONFLICT DO UPDATE SET row_count = row_count + 1;
  INSERT INTO search_owner_rows (content, owner, row_count)
    SELECT 'knowledge', '*shared', 1 WHERE new.collection = 'shared'
    ON CONFLICT DO UPDATE SET row_count = row_count + 1;
END;
CREATE TRIGGER knowledge_owner_rows_delete AFTER DELETE ON knowledge BEGIN
  UPDATE search_owner_rows SET row_count = row_count - 1
    WHERE content = 'knowledge'
      AND (owner IN (old.project_id, '*') OR (owner = '*shared' AND old.collection = 'shared'));
END;
CREATE TRIGGER knowledge_owner_rows_update AFTER UPDATE OF project_id, collection ON knowledge
WHEN new.project_id IS NOT old.project_id OR new.collection IS NOT old.collection BEGIN
  UPDATE search_owner_rows SET row_count = row_count - 1
    WHERE content = 'knowledge'
      AND (owner = old.project_id OR (owner = '*shared' AND old.collection = 'shared'));
  INSERT INTO search_owner_rows (content, owner, row_count)
    VALUES ('knowledge', new.project_id, 1)
    ON CONFLICT DO UPDATE SET row_count = row_count + 1;
  INSERT INTO search_owner_rows (content, owner, row_count)
    SELECT 'knowledge', '*shared', 1 WHERE new.collection = 'shared'
    ON CONFLICT DO UPDATE SET row_count = row_count + 1;
END;
