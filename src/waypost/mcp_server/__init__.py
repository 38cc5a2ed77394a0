"""The MCP server: Waypost's agent operations as Model Context Protocol tools.

Named `mcp_server` (not `mcp`) so that `import mcp` always means the SDK.
Two transports share one tool table: Streamable HTTP at `/mcp` on the public
listener (tools call the resolvers in process) and `waypost mcp` over stdio
(the same tools backed by the REST API of a running Waypost).
"""
