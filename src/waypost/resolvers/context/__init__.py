"""The bounded context packet: query bounds, FTS5 search, budget and assembly.

`params` checks the request, `search` runs the escaped and time-limited FTS5
queries, `budget` counts bytes, `packet` assembles the answer and hands it to
the reranker. REST and GraphQL both call `packet.build`.
"""
