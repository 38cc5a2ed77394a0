"""The bounded context packet: search, budget and assembly."""
