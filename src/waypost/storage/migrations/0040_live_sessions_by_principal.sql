-- An agent's live session with the latest expiry (`GET /api/v1/me` without
-- a `Waypost-Session` header, an MCP session's reuse) was found by walking
-- every session of the agent not yet expired, newest expiry first, reading
-- each to skip the ended ones: an agent that started and ended a session
-- per request had 20,000 of them within 15 minutes, and each such look-up
-- took 15-22 ms (34 ms at 50,000; sessionsjourney). Only live sessions are
-- in this index, in the order the look-up takes them (rowid last, as every
-- index ends).
CREATE INDEX sessions_live_by_principal ON sessions (principal_id, expires_at, started_at)
  WHERE ended_at IS NULL;
