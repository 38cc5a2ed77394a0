-- Words keep their combining marks, and a Latin letter's marks all fold.
--
-- Every index used FTS5's default tokenizer, `unicode61`, for which a
-- combining mark that is a character of its own in its script (categories
-- Mn and Mc: Arabic and Hebrew vowel marks, Thai vowel and tone marks, the
-- vowel signs of Devanagari and the other Indic scripts) is no token
-- character: it split its word, so `كَتَبَ` was indexed as `ك ت ب`,
-- `ฉันกินข้าว` as `ฉ นก นข าว`, and a single letter found such text. Marks
-- are now token characters (`categories`), and `remove_diacritics 2` drops
-- the 25 accents SQLite folds from a Latin letter however many it carries,
-- not a single one only (`tieng` finds `tiếng` written composed, as it
-- found it written decomposed).
--
-- Two kinds of mark stay separators, as they were: the sixteen variation
-- selectors U+FE00-U+FE0F and the marks of the script-neutral blocks that
-- SQLite does not fold (U+0300-U+036F less those 25 and U+0345, U+1AB0-
-- U+1AFF, U+1DC0-U+1DFF, U+20D0-U+20FF, U+FE20-U+FE2F). They are written
-- here as themselves, invisible, between the quotes after `separators`
-- (resolvers/context/words_store.py spells them out; a test compares the
-- two). As token characters the emoji selector U+FE0F (after `⚠`, `❤`,
-- `✔`) would be a word of its own, the same in every such emoji, and glued
-- to a word written next to it (`warning` would not find `⚠️Warning`, nor
-- `1` the keycap `1️⃣`), and a mark such as U+0329 below a Yoruba vowel
-- would glue to its word (`ile` would not find it).
--
-- Each index is dropped and made again with the same columns and options,
-- and filled from its records; the triggers that keep it current name it and
-- are left as they are. The two external-content indexes are rebuilt from
-- their tables, the lifecycle's search from each memo's current revision
-- under the rowid of its key (as 0010_lifecycle_search.sql filled it).

DROP TABLE tasks_fts;
CREATE VIRTUAL TABLE tasks_fts USING fts5(
  title, description, acceptance_text,
  content = 'tasks', content_rowid = 'rowid',
  tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co Mn Mc' separators '︀︁︂︃︄︅︆︇︈︉︊︋︌︍︎️̴̵̶̷̸̡̢̖̗̘̙̜̝̞̟̠̩̪̫̬̯̲̳̹̺̻̼͇͈͉͍͎̅̍̎̐̒̓̔̽̾̿̀́͂̓̈́͆͊͋͌̕̚͏͓͔͕͖͙͚᪵᪶᪷᪸᪹᪺᪽͐͑͒͗͛ͣͤͥͦͧͨͩͪͫͬͭͮͯ᪰᪱᪲᪳᪴᪻᪼͘͜͟͢͝͞͠͡᪾ᪿᫀ᫃᫄᫊᫁᫂᫅᫆᫇᫈᫉᫋ᫌᫍᫎ᫏᫐᫑᫒᫓᫔᫕᫖᫗᫘᫙᫚᫛᫜᫝᫞᫟᫠᫡᫢᫣᫤᫥᫦᫧᫨᫩᫪᫫᫬᫭᫮᫯᫰᫱᫲᫳᫴᫵᫶᫷᫸᫹᫺᫻᫼᫽᫾᫿⃒⃓⃘⃙⃚᷐᷎᷺᷂᷊᷏᷹᷽᷿᷷᷸᷀᷁᷃᷄᷅᷆᷇᷈᷉᷋᷌᷑᷒ᷓᷔᷕᷖᷗᷘᷙᷚᷛᷜᷝᷞᷟᷠᷡᷢᷣᷤᷥᷦᷧᷨᷩᷪᷫᷬᷭᷮᷯᷰᷱᷲᷳᷴ᷵᷻᷾⃐⃑⃔⃕⃖⃗⃛⃜᷶᷼᷍⃝⃞⃟⃠⃡⃢⃣⃤⃥⃦⃪⃫⃨⃬⃭⃮⃯⃧⃩⃰⃱⃲⃳⃴⃵⃶⃷⃸⃹⃺⃻⃼⃽⃾⃿︧︨︩︪︫︬︭︠︡︢︣︤︥︦︮︯'"
);
INSERT INTO tasks_fts (tasks_fts) VALUES ('rebuild');

DROP TABLE knowledge_fts;
CREATE VIRTUAL TABLE knowledge_fts USING fts5(
  title, body, tags, applicability,
  content = 'knowledge', content_rowid = 'rowid',
  tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co Mn Mc' separators '︀︁︂︃︄︅︆︇︈︉︊︋︌︍︎️̴̵̶̷̸̡̢̖̗̘̙̜̝̞̟̠̩̪̫̬̯̲̳̹̺̻̼͇͈͉͍͎̅̍̎̐̒̓̔̽̾̿̀́͂̓̈́͆͊͋͌̕̚͏͓͔͕͖͙͚᪵᪶᪷᪸᪹᪺᪽͐͑͒͗͛ͣͤͥͦͧͨͩͪͫͬͭͮͯ᪰᪱᪲᪳᪴᪻᪼͘͜͟͢͝͞͠͡᪾ᪿᫀ᫃᫄᫊᫁᫂᫅᫆᫇᫈᫉᫋ᫌᫍᫎ᫏᫐᫑᫒᫓᫔᫕᫖᫗᫘᫙᫚᫛᫜᫝᫞᫟᫠᫡᫢᫣᫤᫥᫦᫧᫨᫩᫪᫫᫬᫭᫮᫯᫰᫱᫲᫳᫴᫵᫶᫷᫸᫹᫺᫻᫼᫽᫾᫿⃒⃓⃘⃙⃚᷐᷎᷺᷂᷊᷏᷹᷽᷿᷷᷸᷀᷁᷃᷄᷅᷆᷇᷈᷉᷋᷌᷑᷒ᷓᷔᷕᷖᷗᷘᷙᷚᷛᷜᷝᷞᷟᷠᷡᷢᷣᷤᷥᷦᷧᷨᷩᷪᷫᷬᷭᷮᷯᷰᷱᷲᷳᷴ᷵᷻᷾⃐⃑⃔⃕⃖⃗⃛⃜᷶᷼᷍⃝⃞⃟⃠⃡⃢⃣⃤⃥⃦⃪⃫⃨⃬⃭⃮⃯⃧⃩⃰⃱⃲⃳⃴⃵⃶⃷⃸⃹⃺⃻⃼⃽⃾⃿︧︨︩︪︫︬︭︠︡︢︣︤︥︦︮︯'"
);
INSERT INTO knowledge_fts (knowledge_fts) VALUES ('rebuild');

DROP TABLE lifecycle_search;
CREATE VIRTUAL TABLE lifecycle_search USING fts5 (
  title, question, context,
  tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co Mn Mc' separators '︀︁︂︃︄︅︆︇︈︉︊︋︌︍︎️̴̵̶̷̸̡̢̖̗̘̙̜̝̞̟̠̩̪̫̬̯̲̳̹̺̻̼͇͈͉͍͎̅̍̎̐̒̓̔̽̾̿̀́͂̓̈́͆͊͋͌̕̚͏͓͔͕͖͙͚᪵᪶᪷᪸᪹᪺᪽͐͑͒͗͛ͣͤͥͦͧͨͩͪͫͬͭͮͯ᪰᪱᪲᪳᪴᪻᪼͘͜͟͢͝͞͠͡᪾ᪿᫀ᫃᫄᫊᫁᫂᫅᫆᫇᫈᫉᫋ᫌᫍᫎ᫏᫐᫑᫒᫓᫔᫕᫖᫗᫘᫙᫚᫛᫜᫝᫞᫟᫠᫡᫢᫣᫤᫥᫦᫧᫨᫩᫪᫫᫬᫭᫮᫯᫰᫱᫲᫳᫴᫵᫶᫷᫸᫹᫺᫻᫼᫽᫾᫿⃒⃓⃘⃙⃚᷐᷎᷺᷂᷊᷏᷹᷽᷿᷷᷸᷀᷁᷃᷄᷅᷆᷇᷈᷉᷋᷌᷑᷒ᷓᷔᷕᷖᷗᷘᷙᷚᷛᷜᷝᷞᷟᷠᷡᷢᷣᷤᷥᷦᷧᷨᷩᷪᷫᷬᷭᷮᷯᷰᷱᷲᷳᷴ᷵᷻᷾⃐⃑⃔⃕⃖⃗⃛⃜᷶᷼᷍⃝⃞⃟⃠⃡⃢⃣⃤⃥⃦⃪⃫⃨⃬⃭⃮⃯⃧⃩⃰⃱⃲⃳⃴⃵⃶⃷⃸⃹⃺⃻⃼⃽⃾⃿︧︨︩︪︫︬︭︠︡︢︣︤︥︦︮︯'"
);
INSERT INTO lifecycle_search (rowid, title, question, context)
  SELECT k.rowid, r.title, r.question, r.context
  FROM lifecycle_search_keys k
  JOIN lifecycle_memos m ON m.tenant = k.tenant AND m.id = k.memo_id
  JOIN lifecycle_revisions r
    ON r.tenant = m.tenant AND r.memo_id = m.id AND r.version = m.current_version;
