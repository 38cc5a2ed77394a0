-- The `expired` status filter and its count walked every decision of the
-- project with an expiry, passed or not (0027's index is in list order, and
-- which expiries have passed changes with the time): 6.4 ms for the count
-- at 20,000 future expiries, and the console's inbox asks for both on every
-- poll of every project. By expiry, the passed ones are one range: the
-- count reads that range, and so does a page when it holds few enough to
-- sort (decisions/lists_store.py).
CREATE INDEX decision_holds_expiry ON decision_holds (project_id, expires_at)
  WHERE expires_at IS NOT NULL;
