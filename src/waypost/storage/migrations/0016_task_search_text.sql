-- Acceptance criteria are searched as text, not as their stored JSON.
--
-- tasks_fts indexed `acceptance_criteria` as stored: JSON written with ASCII
-- escapes, so "café" was indexed as the token "u00e9", a criterion's second
-- line as "n" glued to its first word, and no criterion word outside ASCII
-- could be found. The index now takes the criteria as plain text, one per
-- line: the same expression in every trigger, and in `acceptance_text`, the
-- column the index reads as its content (rebuild, admin verify's
-- integrity-check), kept equal to it by two triggers of its own. The index
-- triggers compute the text from the JSON themselves, so their order against
-- the column's triggers does not matter.
ALTER TABLE tasks ADD COLUMN acceptance_text TEXT NOT NULL DEFAULT '';
UPDATE tasks SET acceptance_text =
  coalesce((SELECT group_concat(value, char(10)) FROM json_each(acceptance_criteria)), '');

CREATE TRIGGER tasks_acceptance_text_insert AFTER INSERT ON tasks BEGIN
  UPDATE tasks SET acceptance_text =
    coalesce((SELECT group_concat(value, char(10)) FROM json_each(new.acceptance_criteria)), '')
  WHERE rowid = new.rowid;
END;
CREATE TRIGGER tasks_acceptance_text_update AFTER UPDATE OF acceptance_criteria ON tasks BEGIN
  UPDATE tasks SET acceptance_text =
    coalesce((SELECT group_concat(value, char(10)) FROM json_each(new.acceptance_criteria)), '')
  WHERE rowid = new.rowid;
END;

DROP TRIGGER tasks_fts_insert;
DROP TRIGGER tasks_fts_delete;
DROP TRIGGER tasks_fts_update;
DROP TABLE tasks_fts;
CREATE VIRTUAL TABLE tasks_fts USING fts5(
  title, description, acceptance_text,
  content = 'tasks', content_rowid = 'rowid'
);
CREATE TRIGGER tasks_fts_insert AFTER INSERT ON tasks BEGIN
  INSERT INTO tasks_fts (rowid, title, description, acceptance_text)
  VALUES (new.rowid, new.title, new.description,
    coalesce((SELECT group_concat(value, char(10)) FROM json_each(new.acceptance_criteria)), ''));
END;
CREATE TRIGGER tasks_fts_delete AFTER DELETE ON tasks BEGIN
  INSERT INTO tasks_fts (tasks_fts, rowid, title, description, acceptance_text)
  VALUES ('delete', old.rowid, old.title, old.description,
    coalesce((SELECT group_concat(value, char(10)) FROM json_each(old.acceptance_criteria)), ''));
END;
CREATE TRIGGER tasks_fts_update AFTER UPDATE OF title, description, acceptance_criteria ON tasks
BEGIN
  INSERT INTO tasks_fts (tasks_fts, rowid, title, description, acceptance_text)
  VALUES ('delete', old.rowid, old.title, old.description,
    coalesce((SELECT group_concat(value, char(10)) FROM json_each(old.acceptance_criteria)), ''));
  INSERT INTO tasks_fts (rowid, title, description, acceptance_text)
  VALUES (new.rowid, new.title, new.description,
    coalesce((SELECT group_concat(value, char(10)) FROM json_each(new.acceptance_criteria)), ''));
END;
INSERT INTO tasks_fts (tasks_fts) VALUES ('rebuild');
