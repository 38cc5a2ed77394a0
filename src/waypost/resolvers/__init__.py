"""The operations, one module per domain. No transport (HTTP, GraphQL) in here."""
