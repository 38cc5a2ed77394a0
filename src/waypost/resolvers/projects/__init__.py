"""Projects and their policy, with its immutable revision history."""
