"""Reflection in band: the server asks the host's model for a justification the gate is missing.

On a client that can sample, a gated call need not come back to the agent as a miss: the server
sends the hint's prompt, with what the decision is about (the operation, the decision, the data the
worker described: CRS, extent, data type, categorical or continuous), to the host's model, validates
the JSON it answers exactly as an agent's justification is validated, and persists it marked
``answered_by="sampling: <model>"``; the operation then continues in the same call. An answer that
fails validation gets one retry that shows every field error. Whatever stops it (no answer in time,
the client declining, two invalid answers) leaves the hint to the agent, with the reason
(:attr:`~llmc_mcp.reflection.gate.Hint.fallback`).

How the question reaches the model depends on the protocol era; :data:`Ask` hides it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from llmc_mcp.errors import JustificationInvalid, LlmcError, RecordExists
from llmc_mcp.reflection.gate import Hint
from llmc_mcp.reflection.schema import text_problem

Ask = Callable[[str, str], Awaitable[tuple[str, str]]]
"""``ask(system, text) -> (answer, model)``: one question to the host's model."""


class NotAsked(Exception):
    """Raised by an :data:`Ask` that will not put the question to this client; the message says why."""


MAX_ANSWER_CHARS = 20_000
MAX_MODEL_CHARS = 200
"""A model name the record keeps (``answered_by``): real ones are a few dozen characters. The client
names the model, and the record, shared by every session, copies it into their outputs' provenance."""
SYSTEM = (
    "You justify one consequential choice in a geospatial operation an AI agent is running through "
    "llmc-mcp. Reason about the data described, not in general. Reply with one JSON object and "
    "nothing else: no prose, no code fence."
)


def question(hint: Hint, about: str, subject: str) -> str:
    """What the host's model is asked: the decision, the data it concerns, then the prompt itself."""
    decision = ", ".join(f"{k}={v}" for k, v in hint.prompt_args.items())
    return (
        f"Operation: {hint.operation}\nDecision ({hint.domain}): {decision}\n"
        f"Data: {about or 'not described'}\n\n{hint.prompt_text}\n\n"
        f'Set choice.method to "{subject}" exactly. Reply with the JSON object only.'
    )


Persist = Callable[[dict[str, Any], str], Awaitable[object]]
"""``persist(justification, model)``: validate and store the model's answer (the gate's rules, and a
person's review when it is below ``--min-confidence``); raises as the gate does."""


async def justify(
    hint: Hint, persist: Persist, *, subject: str, about: str, ask: Ask, timeout: float
) -> str | None:
    """Obtain and persist a justification for ``hint``; None when done, else why not (for the hint).

    ``subject`` is the value being justified (``choice.method`` must equal it).
    """
    text = question(hint, about, subject)
    errors: list[str] = []
    for _attempt in range(2):
        try:
            with anyio.fail_after(timeout):
                answer, model = await ask(SYSTEM, text)
        except TimeoutError:
            return f"the host's model did not answer within {timeout:g} s"
        except NotAsked as exc:
            return str(exc)
        except Exception as exc:  # the client declined or failed the request: its reason, briefly
            return f"the client did not sample ({type(exc).__name__}: {str(exc)[:160]})"
        if (problem := text_problem(model, MAX_MODEL_CHARS)) is not None:
            return f"the client's answer names its model with text that {problem}; nothing was stored"
        payload = _json_object(answer)
        if payload is None:
            errors = [
                f"the answer is {len(answer)} characters, the limit is {MAX_ANSWER_CHARS}"
                if isinstance(answer, str) and len(answer) > MAX_ANSWER_CHARS
                else "the answer is not one JSON object"
            ]
        else:
            try:
                await persist(payload, model)
                return None
            except RecordExists:
                return None  # justified meanwhile (another call, another session): the gate is satisfied
            except JustificationInvalid as exc:
                errors = [str(e) for e in exc.details.get("errors", [exc.message])]
            except LlmcError as exc:  # a person declined it, or no one could be asked
                return f"the host's model answered, but {exc.message[0].lower()}{exc.message[1:]}"
        text = (
            f"{question(hint, about, subject)}\n\nYour previous answer was refused. Fix every problem:\n- "
            + "\n- ".join(errors)
        )
    return (
        "the host's model answered twice with a justification that failed validation: "
        + "; ".join(errors)[:400]
    )


def _json_object(answer: str) -> dict[str, Any] | None:
    """The one JSON object in a model's answer, tolerating a code fence or a sentence around it."""
    if not isinstance(answer, str) or len(answer) > MAX_ANSWER_CHARS:
        return None
    text = answer
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
