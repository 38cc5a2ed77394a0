"""The decision-memo lifecycle: model, decoder, custody, store, commands,
queries and tenant policy (lifecycle-model.md). No transport in here."""
