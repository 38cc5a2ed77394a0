"""The HTTP plumbing every listener shares: bearer authentication (the public
one's), strict decoding and what every answer carries."""
