"""The gate: one function every face uses before a consequential operation runs.

:meth:`Gate.check` turns an operation's validated arguments into decisions,
looks each up in the store under its own key, and returns a hint for every
miss. :meth:`Gate.require` raises :class:`ReflectionRequired` carrying all
missing hints at once, so an agent fixes everything in one round trip.

:meth:`Gate.persist` accepts a justification only for a hash a gate of this
workspace issued to the same principal (:mod:`llmc_mcp.reflection.pending`):
the record's decision args come from the issued hint, not from the caller, so
a justification is always tied to a real decision that was actually asked for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, Field

from llmc_mcp.errors import InvalidArgument, LlmcError, NotFound, RecordExists
from llmc_mcp.reflection.pending import PendingHints
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.schema import Justification, validate_justification
from llmc_mcp.reflection.specs import DOMAINS, Decision, subject_of
from llmc_mcp.reflection.store import JustificationStore, Record, check_domain, check_key
from llmc_mcp.sessions import principal


class Gated(Protocol):
    """Something with decisions: a catalog operation as the gate sees it. The catalog
    (:mod:`llmc_mcp.operations.catalog`) sits above the records and imports them."""

    @property
    def qualname(self) -> str: ...

    def decisions(
        self, args: Mapping[str, Any], facts: Mapping[str, str] | None = None
    ) -> list[Decision]: ...


class Hint(BaseModel):
    """What an agent needs to justify one decision: machine-readable, with the prompt inline."""

    domain: str
    prompt: str
    prompt_args: dict[str, Any]
    hash: str = Field(description="The cache key; pass it back to persist.")
    prompt_text: str
    operation: str
    fallback: str | None = Field(
        None, description="Why the server did not obtain this justification itself (sampling), when it tried."
    )


class PersistResult(BaseModel):
    persisted: bool = True
    hash: str
    domain: str
    operation: str
    prompt: str


class ReflectionRequired(LlmcError):
    """Raised when a decision has no valid justification yet; carries every missing hint."""

    kind = "reflection_required"

    def __init__(self, hints: list[Hint], next_action: str):
        domains = ", ".join(h.domain for h in hints)
        super().__init__(f"Justification required before {hints[0].operation}: {domains}.", fix=next_action)
        self.hints = hints
        self.next_action = next_action

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "message": self.message,
            "reflection_required": [h.model_dump(exclude_none=True) for h in self.hints],
            "next_action": self.next_action,
        }


def cache_key(domain: str, prompt_hash: str, args: Mapping[str, Any]) -> str:
    """sha256 over the domain, the prompt template's hash and the normalized args as stable JSON."""
    material = json.dumps(
        {"domain": domain, "prompt_hash": prompt_hash, "args": dict(args)},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return "sha256:" + hashlib.sha256(material.encode()).hexdigest()


class Gate:
    """Decides whether an operation may run and accepts justifications for what it asked."""

    def __init__(self, store: JustificationStore, prompts: PromptLibrary, *, next_action: str):
        self.store = store
        self.prompts = prompts
        self.next_action = next_action
        self.pending = PendingHints(store)

    def key(self, decision: Decision) -> str:
        return cache_key(decision.domain, self.prompts.get(decision.prompt).hash, decision.args)

    def check(
        self,
        op: Gated,
        args: Mapping[str, Any],
        *,
        facts: Mapping[str, str] | None = None,
        session: str | None = None,
    ) -> list[Hint]:
        """Hints for every decision of ``op`` that has no valid justification (empty: may run).

        ``facts`` describe the data (see :func:`~llmc_mcp.reflection.specs.check_facts`); decisions
        are scoped by them. Each hint is bound to ``session``: only it may persist a justification.
        """
        hints = []
        for decision in op.decisions(args, facts):
            key = self.key(decision)
            if self.store.get(decision.domain, key) is not None:
                continue
            hint = self._hint(decision, key, op.qualname)
            content = {"hint": hint.model_dump(), "args": decision.args, "subject": decision.subject}
            self.pending.issue(decision.domain, key, content, principal(session))
            hints.append(hint)
        return hints

    def require(
        self,
        op: Gated,
        args: Mapping[str, Any],
        facts: Mapping[str, str] | None = None,
        *,
        session: str | None = None,
    ) -> list[Record]:
        """The records that justify every decision of ``op``, or ReflectionRequired for those missing."""
        hints = self.check(op, args, facts=facts, session=session)
        if hints:
            raise ReflectionRequired(hints, self.next_action)
        return self.justifications(op, args, facts)

    def justifications(
        self, op: Gated, args: Mapping[str, Any], facts: Mapping[str, str] | None = None
    ) -> list[Record]:
        """The stored records behind the decisions of ``op`` that have one: the reasons its outputs'
        provenance records give (:mod:`llmc_mcp.provenance`)."""
        found = []
        for decision in op.decisions(args, facts):
            record = self.store.get(decision.domain, self.key(decision))
            if record is not None:
                found.append(record)
        return found

    def persist(
        self,
        hash: object,
        domain: object,
        justification: object,
        *,
        session: str | None = None,
        answered_by: str | None = None,
        review: dict[str, Any] | None = None,
        supersede: bool = False,
    ) -> PersistResult:
        """Validate and store a justification for a hint this gate issued to ``session``.

        Records are write-once for everyone but their writer: a key that already holds a valid
        record is refused, and a hint is consumed by the persist that answers it. With
        ``supersede``, the principal that wrote the record replaces it (no hint needed: the record
        names its decision); the old record is kept, linked to its successor. ``answered_by`` names
        who wrote it when not the agent (the host's model, by sampling); ``review`` is a person's
        approval of it.
        """
        hint, decision, valid = self.vet(hash, domain, justification, session=session, supersede=supersede)
        key = hint.hash
        owner = principal(session)
        record = Record(
            key=key,
            domain=hint.domain,
            operation=hint.operation,
            prompt=hint.prompt,
            prompt_args=decision.args,
            prompt_hash=self.prompts.get(hint.prompt).hash,
            justification=valid,
            answered_by=answered_by,
            review=review,
        )
        admit = lambda size: self.pending.admit_record(owner, size)  # noqa: E731
        if supersede:
            self.store.supersede(record, owner=owner, admit=admit)
            return PersistResult(hash=key, domain=hint.domain, operation=hint.operation, prompt=hint.prompt)
        try:
            self.store.put(record, owner=owner, admit=admit)
        except RecordExists:
            self.pending.consume(hint.domain, key)
            raise
        self.pending.consume(hint.domain, key)
        return PersistResult(hash=key, domain=hint.domain, operation=hint.operation, prompt=hint.prompt)

    def vet(
        self,
        hash: object,
        domain: object,
        justification: object,
        *,
        session: str | None = None,
        supersede: bool = False,
    ) -> tuple[Hint, Decision, Justification]:
        """Everything :meth:`persist` checks, without storing: the hint, its decision, the valid
        justification. For a step between validation and the write (a person's review)."""
        key, domain = check_key(hash), check_domain(domain)
        if supersede:
            return self._vet_replacement(key, domain, justification, principal(session))
        issued = self._issued(key, principal(session))
        if issued is None and self.store.get(domain, key) is not None:
            # Answered meanwhile (by this caller in another process, or by anyone): say so plainly.
            raise RecordExists(
                f"The {domain} decision {key} is already justified; only the session that wrote the "
                "record may replace it.",
                fix="Nothing to persist: run the operation again, it will proceed. If you wrote that "
                "justification and it is wrong, persist the right one with supersede=True; otherwise "
                f"the workspace's owner can run: llmc-mcp justifications revoke {key}",
            )
        if issued is None:
            # Another session's hint is reported exactly like an unknown one: nothing is learnt.
            raise NotFound(
                f"The hash {key} was not issued to this session by this server (or it has expired, "
                "or was already answered).",
                fix="Run the operation again to receive a fresh hint, then persist with its hash.",
            )
        hint, decision = issued
        if hint.domain != domain:
            raise InvalidArgument(
                f"The hash {key} belongs to domain {hint.domain!r}, not {domain!r}.",
                fix=f"Persist it with domain={hint.domain!r}.",
            )
        return hint, decision, validate_justification(justification, decision, hint.prompt_text)

    def _vet_replacement(
        self, key: str, domain: str, justification: object, owner: str | None
    ) -> tuple[Hint, Decision, Justification]:
        """The stored record's decision, when ``owner`` wrote it, with ``justification`` validated.

        Only the record's writer may replace it: another principal's reasoning is theirs to keep, and
        the workspace's owner revokes from the command line.
        """
        current = self.store.get(domain, key)
        if current is None:
            raise NotFound(
                f"No {domain} record {key} to supersede.",
                fix="Persist without supersede, with the hash of the hint the operation gave.",
            )
        if not self.store.written_by(domain, key, owner):
            raise RecordExists(
                f"The {domain} decision {key} was justified by another session; only its writer may "
                "supersede it.",
                fix="Ask the workspace's owner to review it: llmc-mcp justifications show "
                f"{key}, then llmc-mcp justifications revoke {key} if it is wrong.",
            )
        subject = subject_of(current.domain, current.prompt)
        if subject is None:
            raise InvalidArgument(
                f"The {domain} record {key} was made by a prompt this server no longer asks "
                f"({current.prompt!r}).",
                fix=f"Ask the workspace's owner to revoke it: llmc-mcp justifications revoke {key}",
            )
        decision = Decision(current.domain, current.prompt, dict(current.prompt_args), subject)
        hint = self._hint(decision, key, current.operation)
        return hint, decision, validate_justification(justification, decision, hint.prompt_text)

    def _hint(self, decision: Decision, key: str, operation: str) -> Hint:
        return Hint(
            domain=decision.domain,
            prompt=decision.prompt,
            prompt_args=decision.args,
            hash=key,
            prompt_text=self.prompts.get(decision.prompt).render(decision.args),
            operation=operation,
        )

    def _issued(self, key: str, owner: str | None) -> tuple[Hint, Decision] | None:
        """The hint issued for ``key`` to ``owner`` and its decision, whichever domain it is filed in.

        The hint's own domain is found before the caller's ``domain`` is checked, so a wrong domain
        gets the helpful "belongs to domain X" answer rather than "not issued".
        """
        for domain in sorted(DOMAINS):
            content = self.pending.find(domain, key, owner)
            if content is not None:
                hint = Hint.model_validate(content["hint"])
                decision = Decision(hint.domain, hint.prompt, dict(content["args"]), str(content["subject"]))
                return hint, decision
        return None
