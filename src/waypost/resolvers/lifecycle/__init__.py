"""The private decision-memo lifecycle: memo model, documents, commands, queries."""
