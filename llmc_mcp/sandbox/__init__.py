"""The sandbox: RestrictedPython policy, per-session worker processes, limits."""
