-- The bidi controls newer than SQLite's Unicode tables end a word.
--
-- SQLite's `unicode61` knows Unicode 6.1; the Arabic letter mark (U+061C)
-- and the four isolates (U+2066-U+2069) came in 6.3, so it reads them as
-- unassigned, and an unassigned code point is a word character to it.
-- Right-to-left text is written with them (docs/decisions.md keeps them in
-- an option; they set a left-to-right word into a Hebrew or Arabic
-- sentence): `גרסה ⁨rollback⁩ נכשלה` was indexed with the word
-- `⁨rollback⁩`, which `rollback` did not find. They are separators now,
-- after those of 0037 (written here as themselves, invisible, at the end of
-- the quotes after `separators`; resolvers/context/words_store.py spells
-- them out, and a test compares the two).
--
-- As 0037 did, each index is dropped and made again with the same columns
-- and options, and filled from its records; the triggers that keep it
-- current name it and are left as they are. This also brings level a file
-- migrated by a build that shipped an earlier text of 0037 (d7776ab,
-- 7681c9f: fewer marks were separators; storage/schema_guard.EARLIER_TEXTS).

DROP TABLE tasks_fts;
CREATE VIRTUAL TABLE tasks_fts USING fts5(
  title, description, acceptance_text,
  content = 'tasks', content_rowid = 'rowid',
  tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co Mn Mc' separators '︀︁︂︃︄︅︆︇︈︉︊︋︌︍︎️̴̵̶̷̸̡̢̖̗̘̙̜̝̞̟̠̩̪̫̬̯̲̳̹̺̻̼͇͈͉͍͎̅̍̎̐̒̽̾̿̀́͆͊͋͌̕̚͏͓͔͕͖͙͚᪵᪶᪷᪸᪹᪺᪽͐͑͒͗͛ͣͤͥͦͧͨͩͪͫͬͭͮͯ᪰᪱᪲᪳᪴᪻᪼͘͜͟͢͝͞͠͡᪾ᪿᫀ᫃᫄᫊᫁᫂᫅᫆᫇᫈᫉᫋ᫌᫍᫎ᫏᫐᫑᫒᫓᫔᫕᫖᫗᫘᫙᫚᫛᫜᫝᫞᫟᫠᫡᫢᫣᫤᫥᫦᫧᫨᫩᫪᫫᫬᫭᫮᫯᫰᫱᫲᫳᫴᫵᫶᫷᫸᫹᫺᫻᫼᫽᫾᫿⃒⃓⃘⃙⃚᷐᷎᷺᷂᷊᷏᷹᷽᷿᷷᷸᷀᷁᷃᷄᷅᷆᷇᷈᷉᷋᷌᷑᷒ᷓᷔᷕᷖᷗᷘᷙᷚᷛᷜᷝᷞᷟᷠᷡᷢᷣᷤᷥᷦᷧᷨᷩᷪᷫᷬᷭᷮᷯᷰᷱᷲᷳᷴ᷵᷻᷾⃐⃑⃔⃕⃖⃗⃛⃜᷶᷼᷍⃝⃞⃟⃠⃡⃢⃣⃤⃥⃦⃪⃫⃨⃬⃭⃮⃯⃧⃩⃰⃱⃲⃳⃴⃵⃶⃷⃸⃹⃺⃻⃼⃽⃾⃿︧︨︩︪︫︬︭︠︡︢︣︤︥︦︮︯؜⁦⁧⁨⁩'"
);
INSERT INTO tasks_fts (tasks_fts) VALUES ('rebuild');

DROP TABLE knowledge_fts;
CREATE VIRTUAL TABLE knowledge_fts USING fts5(
  title, body, tags, applicability,
  content = 'knowledge', content_rowid = 'rowid',
  tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co Mn Mc' separators '︀︁︂︃︄︅︆︇︈︉︊︋︌︍︎️̴̵̶̷̸̡̢̖̗̘̙̜̝̞̟̠̩̪̫̬̯̲̳̹̺̻̼͇͈͉͍͎̅̍̎̐̒̽̾̿̀́͆͊͋͌̕̚͏͓͔͕͖͙͚᪵᪶᪷᪸᪹᪺᪽͐͑͒͗͛ͣͤͥͦͧͨͩͪͫͬͭͮͯ᪰᪱᪲᪳᪴᪻᪼͘͜͟͢͝͞͠͡᪾ᪿᫀ᫃᫄᫊᫁᫂᫅᫆᫇᫈᫉᫋ᫌᫍᫎ᫏᫐᫑᫒᫓᫔᫕᫖᫗᫘᫙᫚᫛᫜᫝᫞᫟᫠᫡᫢᫣᫤᫥᫦᫧᫨᫩᫪᫫᫬᫭᫮᫯᫰᫱᫲᫳᫴᫵᫶᫷᫸᫹᫺᫻᫼᫽᫾᫿⃒⃓⃘⃙⃚᷐᷎᷺᷂᷊᷏᷹᷽᷿᷷᷸᷀᷁᷃᷄᷅᷆᷇᷈᷉᷋᷌᷑᷒ᷓᷔᷕᷖᷗᷘᷙᷚᷛᷜᷝᷞᷟᷠᷡᷢᷣᷤᷥᷦᷧᷨᷩᷪᷫᷬᷭᷮᷯᷰᷱᷲᷳᷴ᷵᷻᷾⃐⃑⃔⃕⃖⃗⃛⃜᷶᷼᷍⃝⃞⃟⃠⃡⃢⃣⃤⃥⃦⃪⃫⃨⃬⃭⃮⃯⃧⃩⃰⃱⃲⃳⃴⃵⃶⃷⃸⃹⃺⃻⃼⃽⃾⃿︧︨︩︪︫︬︭︠︡︢︣︤︥︦︮︯؜⁦⁧⁨⁩'"
);
INSERT INTO knowledge_fts (knowledge_fts) VALUES ('rebuild');

DROP TABLE lifecycle_search;
CREATE VIRTUAL TABLE lifecycle_search USING fts5 (
  title, question, context,
  tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co Mn Mc' separators '︀︁︂︃︄︅︆︇︈︉︊︋︌︍︎️̴̵̶̷̸̡̢̖̗̘̙̜̝̞̟̠̩̪̫̬̯̲̳̹̺̻̼͇͈͉͍͎̅̍̎̐̒̽̾̿̀́͆͊͋͌̕̚͏͓͔͕͖͙͚᪵᪶᪷᪸᪹᪺᪽͐͑͒͗͛ͣͤͥͦͧͨͩͪͫͬͭͮͯ᪰᪱᪲᪳᪴᪻᪼͘͜͟͢͝͞͠͡᪾ᪿᫀ᫃᫄᫊᫁᫂᫅᫆᫇᫈᫉᫋ᫌᫍᫎ᫏᫐᫑᫒᫓᫔᫕᫖᫗᫘᫙᫚᫛᫜᫝᫞᫟᫠᫡᫢᫣᫤᫥᫦᫧᫨᫩᫪᫫᫬᫭᫮᫯᫰᫱᫲᫳᫴᫵᫶᫷᫸᫹᫺᫻᫼᫽᫾᫿⃒⃓⃘⃙⃚᷐᷎᷺᷂᷊᷏᷹᷽᷿᷷᷸᷀᷁᷃᷄᷅᷆᷇᷈᷉᷋᷌᷑᷒ᷓᷔᷕᷖᷗᷘᷙᷚᷛᷜᷝᷞᷟᷠᷡᷢᷣᷤᷥᷦᷧᷨᷩᷪᷫᷬᷭᷮᷯᷰᷱᷲᷳᷴ᷵᷻᷾⃐⃑⃔⃕⃖⃗⃛⃜᷶᷼᷍⃝⃞⃟⃠⃡⃢⃣⃤⃥⃦⃪⃫⃨⃬⃭⃮⃯⃧⃩⃰⃱⃲⃳⃴⃵⃶⃷⃸⃹⃺⃻⃼⃽⃾⃿︧︨︩︪︫︬︭︠︡︢︣︤︥︦︮︯؜⁦⁧⁨⁩'"
);
INSERT INTO lifecycle_search (rowid, title, question, context)
  SELECT k.rowid, r.title, r.question, r.context
  FROM lifecycle_search_keys k
  JOIN lifecycle_memos m ON m.tenant = k.tenant AND m.id = k.memo_id
  JOIN lifecycle_revisions r
    ON r.tenant = m.tenant AND r.memo_id = m.id AND r.version = m.current_version;
