"""The HTTP plumbing every listener shares: bearer authentication (the public
one's), reading a body within a limit, strict decoding and what every answer
carries."""
