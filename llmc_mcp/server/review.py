"""A person's review of a justification its author was not sure of (``--min-confidence``).

A justification whose confidence is below the server's minimum is not enough alone: before it is
stored, the user is shown the operation, its decision and the reasoning (MCP elicitation) and
approves or declines; an approval is kept in the signed record (``review``). Declined, nothing is
written and the call is refused. A client that cannot show the user a form gets a refusal that
says how to proceed. Agents' justifications and the host model's (sampling) pass the same review.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from llmc_mcp.errors import LlmcError
from llmc_mcp.provenance.report import one_line
from llmc_mcp.reflection.gate import Gate, Hint, PersistResult
from llmc_mcp.reflection.schema import Justification, PlainText
from llmc_mcp.sandbox.wall_clock import paused_wall_clock
from llmc_mcp.server.requests import can_elicit, has_back_channel

Confidence = Literal["low", "medium", "high"]
_RANK = {"low": 0, "medium": 1, "high": 2}


class ReviewForm(BaseModel):
    """What the user answers."""

    approve: bool = Field(description="Approve this decision and let the operation run.")
    comment: PlainText = Field("", description="A note kept with the decision (optional).", max_length=500)


class ReviewRequired(LlmcError):
    """A low-confidence justification needs a person's review and this client cannot ask one."""

    kind = "review_required"


class ReviewDeclined(LlmcError):
    """The user declined a low-confidence justification: nothing was stored."""

    kind = "review_declined"


def needs_review(justification: Justification, minimum: Confidence) -> bool:
    return _RANK[justification.confidence] < _RANK[minimum]


async def persist_reviewed(
    gate: Gate,
    ctx: Context | None,
    minimum: Confidence,
    hash: object,
    domain: object,
    justification: object,
    *,
    session: str | None,
    answered_by: str | None = None,
    timeout: float = 300.0,
    supersede: bool = False,
) -> PersistResult:
    """``gate.persist``, with the user's review first when the justification is below ``minimum``."""
    hint, _decision, valid = await anyio.to_thread.run_sync(
        lambda: gate.vet(hash, domain, justification, session=session, supersede=supersede)
    )
    review = None
    if needs_review(valid, minimum):
        review = await ask_person(ctx, _message(hint, valid, minimum), timeout)
    return await anyio.to_thread.run_sync(
        lambda: gate.persist(
            hash,
            domain,
            justification,
            session=session,
            answered_by=answered_by,
            review=review,
            supersede=supersede,
        )
    )


def _message(hint: Hint, justification: Justification, minimum: Confidence) -> str:
    return review_message(hint.operation, hint.prompt_args, justification, minimum)


def review_message(
    operation: str, decision_args: dict[str, Any], justification: Justification, minimum: str
) -> str:
    """What the user is shown: the operation, the decision and the whole reasoning.

    Each text the agent wrote is shown on its own line (:func:`one_line`), so none can pose as a
    line of the server's, such as the question itself.
    """
    decision = ", ".join(f"{k}={v}" for k, v in decision_args.items())
    rejected = "; ".join(f"{a.method} ({a.why_not})" for a in justification.alternatives)
    choice = justification.choice
    return (
        f"An AI agent wants to run {operation} with {one_line(decision)}. Its justification has "
        f"{justification.confidence} confidence, below this server's minimum ({minimum}), so it needs "
        f"your approval.\n\nIntent: {one_line(justification.intent)}\nChoice: {one_line(choice.method)}: "
        f"{one_line(choice.rationale)}\nTrade-offs: {one_line(choice.tradeoffs)}\n"
        f"Rejected: {one_line(rejected)}\n\nApprove this decision?"
    )


async def ask_person(ctx: Context | None, message: str, timeout: float) -> dict[str, Any]:
    """The user's approval (the review to keep), or ReviewRequired / ReviewDeclined."""
    from llmc_mcp.server.resumable import can_ask_on_retry, elicit_on_retry

    refusal = ReviewRequired(
        "This justification's confidence is below the server's minimum (--min-confidence), so a person "
        "must approve it, and this client cannot show the user a form (MCP elicitation).",
        fix="Ask the user to approve the decision and persist it with the confidence you honestly hold "
        "after that, or ask the server's operator to lower --min-confidence.",
    )
    if ctx is None or not can_elicit(ctx):
        raise refusal
    with paused_wall_clock():
        try:
            with anyio.fail_after(timeout):
                if has_back_channel(ctx):
                    outcome = await ctx.elicit(message, ReviewForm)
                    action, data = outcome.action, getattr(outcome, "data", None)
                elif can_ask_on_retry():
                    action, content = await elicit_on_retry(message, ReviewForm)
                    data = ReviewForm.model_validate(content) if action == "accept" else None
                else:
                    raise refusal
        except TimeoutError:
            raise ReviewDeclined(
                f"Nobody answered the review within {timeout:g} s; nothing was stored.",
                fix="Repeat the operation when the user can answer.",
            ) from None
        except ValueError:
            # The client's content is not the form (a comment past 500 characters or holding control
            # characters): bounded like every client text, and not an approval.
            raise ReviewDeclined(
                "The review the client returned is not the form asked for (the comment holds at most 500 "
                "characters, without control characters); nothing was stored.",
                fix="Repeat the operation and answer the review with a shorter, plain comment.",
            ) from None
    if action != "accept" or data is None or not data.approve:
        raise ReviewDeclined(
            "The user did not approve this decision; nothing was stored.",
            fix="Reconsider the choice (another method or CRS), or ask the user what they want.",
        )
    when = datetime.now(UTC).isoformat(timespec="seconds")
    return {"action": "approved", "by": "user (elicitation)", "comment": data.comment, "at": when}
