-- A knowledge list of one kind (`?kind=rejected_approach`, the console's
-- kind filter) walked every record of the project, newest first, testing
-- each one's kind (18 ms a page at 50,000 records for a kind 20 of them
-- have), and with `include_shared` every shared record of the file too. One
-- range of each index holds a kind's records in list order, as
-- `knowledge_by_status` (0020) does a status's.
CREATE INDEX knowledge_by_kind ON knowledge (project_id, kind, updated_at DESC, id DESC);
CREATE INDEX knowledge_shared_by_kind ON knowledge (kind, updated_at DESC, id DESC)
  WHERE collection = 'shared';
