-- A knowledge list with `include_shared` and a `status` filter walked every
-- shared record of the file, reading each to test its status (11 ms a page
-- at 8,000 shared records, 24 ms at 16,000, for a status none of them
-- holds), and with a `tag` too every shared row of the tag (10 ms at 3,600).
-- One range of each index holds a status's shared records in list order, as
-- `knowledge_shared_by_kind` (0028) does a kind's.
CREATE INDEX knowledge_shared_by_status ON knowledge (status, updated_at DESC, id DESC)
  WHERE collection = 'shared';
CREATE INDEX knowledge_tags_shared_by_status
  ON knowledge_tags (tag, status, updated_at DESC, knowledge_id DESC) WHERE shared = 1;
