-- Each search index knows whose its rows are: an `owner` column holding
-- one word for the row's project (`x` and the hex of the project id's
-- UTF-8 bytes, so no two projects share it and no id can make two words)
-- and, for knowledge, its collection (`project`, or `shared` for a record
-- shared across projects): as many words in every row of a table, so that
-- BM25's length normalisation ranks a shared record as a private one of the
-- same text (with `shared` alone it ranked below it; review77).
--
-- A packet's search ranked every match of the whole index, every project's
-- (BM25 costs about 40 times what finding a row does), and then kept the
-- asking project's: for a project of 200 records and 200 tasks among the
-- 100,000 of the bench corpus, 80 queries of its own words took 8.9-16.7 ms
-- at the 90th percentile, and 0.78-0.99 ms ranking its own matches alone
-- (docs/context.md, "Ranking less"). With the owner word in the index, the
-- search can ask FTS5 for the project's matches alone.
--
-- The owner words are never matched by a user's terms: every query leaves
-- the column out (`- owner : (...)`), and BM25 is given weight 0 for it, so
-- the ranks of text matches are those of a table without the column but
-- for each row's length counting one word more (a task) or two (a record)
-- (resolvers/context/search.py).
--
-- FTS5 reads an external content table only to rebuild an index or check
-- it; the owner word is not stored anywhere, so each index's content is a
-- view that derives it. The triggers that keep the indexes current are
-- made again with the owner word (the task text computed from the JSON as
-- 0016's were), and knowledge's also follows `collection`
-- (sharing and unsharing a record changes its owner words). Each index is
-- dropped, made again with the same tokenizer as 0038, and filled from its
-- records.

DROP TRIGGER tasks_fts_insert;
DROP TRIGGER tasks_fts_delete;
DROP TRIGGER tasks_fts_update;
DROP TABLE tasks_fts;
CREATE VIEW tasks_search AS
  SELECT rowid AS rid, title, description, acceptance_text,
    'x' || lower(hex(project_id)) AS owner
  FROM tasks;
CREATE VIRTUAL TABLE tasks_fts USING fts5(
  title, description, acceptance_text, owner,
  content = 'tasks_search', content_rowid = 'rid',
  tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co Mn Mc' separators '︀︁︂︃︄︅︆︇︈︉︊︋︌︍︎️̴̵̶̷̸̡̢̖̗̘̙̜̝̞̟̠̩̪̫̬̯̲̳̹̺̻̼͇͈͉͍͎̅̍̎̐̒̽̾̿̀́͆͊͋͌̕̚͏͓͔͕͖͙͚᪵᪶᪷᪸᪹᪺᪽͐͑͒͗͛ͣͤͥͦͧͨͩͪͫͬͭͮͯ᪰᪱᪲᪳᪴᪻᪼͘͜͟͢͝͞͠͡᪾ᪿᫀ᫃᫄᫊᫁᫂᫅᫆᫇᫈᫉᫋ᫌᫍᫎ᫏᫐᫑᫒᫓᫔᫕᫖᫗᫘᫙᫚᫛᫜᫝᫞᫟᫠᫡᫢᫣᫤᫥᫦᫧᫨᫩᫪᫫᫬᫭᫮᫯᫰᫱᫲᫳᫴᫵᫶᫷᫸᫹᫺᫻᫼᫽᫾᫿⃒⃓⃘⃙⃚᷐᷎᷺᷂᷊᷏᷹᷽᷿᷷᷸᷀᷁᷃᷄᷅᷆᷇᷈᷉᷋᷌᷑᷒ᷓᷔᷕᷖᷗᷘᷙᷚᷛᷜᷝᷞᷟᷠᷡᷢᷣᷤᷥᷦᷧᷨᷩᷪᷫᷬᷭᷮᷯᷰᷱᷲᷳᷴ᷵᷻᷾⃐⃑⃔⃕⃖⃗⃛⃜᷶᷼᷍⃝⃞⃟⃠⃡⃢⃣⃤⃥⃦⃪⃫⃨⃬⃭⃮⃯⃧⃩⃰⃱⃲⃳⃴⃵⃶⃷⃸⃹⃺⃻⃼⃽⃾⃿︧︨︩︪︫︬︭︠︡︢︣︤︥︦︮︯؜⁦⁧⁨⁩'"
);
INSERT INTO tasks_fts (tasks_fts) VALUES ('rebuild');
CREATE TRIGGER tasks_fts_insert AFTER INSERT ON tasks BEGIN
  INSERT INTO tasks_fts (rowid, title, description, acceptance_text, owner)
  VALUES (new.rowid, new.title, new.description,
    coalesce((SELECT group_concat(value, char(10)) FROM json_each(new.acceptance_criteria)), ''),
    'x' || lower(hex(new.project_id)));
END;
CREATE TRIGGER tasks_fts_delete AFTER DELETE ON tasks BEGIN
  INSERT INTO tasks_fts (tasks_fts, rowid, title, description, acceptance_text, owner)
  VALUES ('delete', old.rowid, old.title, old.description,
    coalesce((SELECT group_concat(value, char(10)) FROM json_each(old.acceptance_criteria)), ''),
    'x' || lower(hex(old.project_id)));
END;
CREATE TRIGGER tasks_fts_update
AFTER UPDATE OF title, description, acceptance_criteria, project_id ON tasks
BEGIN
  INSERT INTO tasks_fts (tasks_fts, rowid, title, description, acceptance_text, owner)
  VALUES ('delete', old.rowid, old.title, old.description,
    coalesce((SELECT group_concat(value, char(10)) FROM json_each(old.acceptance_criteria)), ''),
    'x' || lower(hex(old.project_id)));
  INSERT INTO tasks_fts (rowid, title, description, acceptance_text, owner)
  VALUES (new.rowid, new.title, new.description,
    coalesce((SELECT group_concat(value, char(10)) FROM json_each(new.acceptance_criteria)), ''),
    'x' || lower(hex(new.project_id)));
END;

DROP TRIGGER knowledge_fts_insert;
DROP TRIGGER knowledge_fts_delete;
DROP TRIGGER knowledge_fts_update;
DROP TABLE knowledge_fts;
CREATE VIEW knowledge_search AS
  SELECT rowid AS rid, title, body, tags, applicability,
    'x' || lower(hex(project_id)) || ' ' || collection AS owner
  FROM knowledge;
CREATE VIRTUAL TABLE knowledge_fts USING fts5(
  title, body, tags, applicability, owner,
  content = 'knowledge_search', content_rowid = 'rid',
  tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co Mn Mc' separators '︀︁︂︃︄︅︆︇︈︉︊︋︌︍︎️̴̵̶̷̸̡̢̖̗̘̙̜̝̞̟̠̩̪̫̬̯̲̳̹̺̻̼͇͈͉͍͎̅̍̎̐̒̽̾̿̀́͆͊͋͌̕̚͏͓͔͕͖͙͚᪵᪶᪷᪸᪹᪺᪽͐͑͒͗͛ͣͤͥͦͧͨͩͪͫͬͭͮͯ᪰᪱᪲᪳᪴᪻᪼͘͜͟͢͝͞͠͡᪾ᪿᫀ᫃᫄᫊᫁᫂᫅᫆᫇᫈᫉᫋ᫌᫍᫎ᫏᫐᫑᫒᫓᫔᫕᫖᫗᫘᫙᫚᫛᫜᫝᫞᫟᫠᫡᫢᫣᫤᫥᫦᫧᫨᫩᫪᫫᫬᫭᫮᫯᫰᫱᫲᫳᫴᫵᫶᫷᫸᫹᫺᫻᫼᫽᫾᫿⃒⃓⃘⃙⃚᷐᷎᷺᷂᷊᷏᷹᷽᷿᷷᷸᷀᷁᷃᷄᷅᷆᷇᷈᷉᷋᷌᷑᷒ᷓᷔᷕᷖᷗᷘᷙᷚᷛᷜᷝᷞᷟᷠᷡᷢᷣᷤᷥᷦᷧᷨᷩᷪᷫᷬᷭᷮᷯᷰᷱᷲᷳᷴ᷵᷻᷾⃐⃑⃔⃕⃖⃗⃛⃜᷶᷼᷍⃝⃞⃟⃠⃡⃢⃣⃤⃥⃦⃪⃫⃨⃬⃭⃮⃯⃧⃩⃰⃱⃲⃳⃴⃵⃶⃷⃸⃹⃺⃻⃼⃽⃾⃿︧︨︩︪︫︬︭︠︡︢︣︤︥︦︮︯؜⁦⁧⁨⁩'"
);
INSERT INTO knowledge_fts (knowledge_fts) VALUES ('rebuild');
CREATE TRIGGER knowledge_fts_insert AFTER INSERT ON knowledge BEGIN
  INSERT INTO knowledge_fts (rowid, title, body, tags, applicability, owner)
  VALUES (new.rowid, new.title, new.body, new.tags, new.applicability,
    'x' || lower(hex(new.project_id)) || ' ' || new.collection);
END;
CREATE TRIGGER knowledge_fts_delete AFTER DELETE ON knowledge BEGIN
  INSERT INTO knowledge_fts (knowledge_fts, rowid, title, body, tags, applicability, owner)
  VALUES ('delete', old.rowid, old.title, old.body, old.tags, old.applicability,
    'x' || lower(hex(old.project_id)) || ' ' || old.collection);
END;
CREATE TRIGGER knowledge_fts_update
AFTER UPDATE OF title, body, tags, applicability, project_id, collection ON knowledge
BEGIN
  INSERT INTO knowledge_fts (knowledge_fts, rowid, title, body, tags, applicability, owner)
  VALUES ('delete', old.rowid, old.title, old.body, old.tags, old.applicability,
    'x' || lower(hex(old.project_id)) || ' ' || old.collection);
  INSERT INTO knowledge_fts (rowid, title, body, tags, applicability, owner)
  VALUES (new.rowid, new.title, new.body, new.tags, new.applicability,
    'x' || lower(hex(new.project_id)) || ' ' || new.collection);
END;
