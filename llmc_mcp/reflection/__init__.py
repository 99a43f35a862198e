"""The reflection gate: specs, prompts, justification schema, store and the gate itself."""
