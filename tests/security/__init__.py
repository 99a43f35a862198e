"""Security suite: an attack corpus run against the real server, and isolation properties."""
