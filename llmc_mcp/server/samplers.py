"""How the gate asks the client's model for a justification, for the request being served: over the
request's own back channel when it has one (the handshake era), else by pausing the call and asking
on its retry (the resumable era), else not at all, with the reason for the hint."""

from __future__ import annotations

from mcp.server.mcpserver import Context

from llmc_mcp.reflection.sampling import Ask
from llmc_mcp.server.requests import can_sample, handshake_sampler, has_back_channel
from llmc_mcp.server.resumable import ask_on_retry, can_ask_on_retry


def sampler_for(ctx: Context | None) -> tuple[Ask | None, str]:
    """How to ask this request's client for a sample, or why it cannot be asked (for the hint)."""
    if ctx is None:
        return None, "no client request to ask on"
    if not can_sample(ctx):
        return None, "the client did not declare sampling"
    if has_back_channel(ctx):
        return handshake_sampler(ctx), ""
    if can_ask_on_retry():
        return ask_on_retry, ""
    return None, "this request cannot be paused for the client's answer (no session to resume it in)"
