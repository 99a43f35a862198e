"""What was decided in a workspace, and behind which outputs: for people, for agents, for audits.

One report serves three readers: ``llmc-mcp justifications list|show|export`` (a person at the
terminal, or a Markdown file for a reviewer), ``reflection.report()`` inside code mode (the agent),
and JSON for tools. Each decision comes from the authenticated store; which outputs it stands behind
comes from the provenance records beside them (:mod:`llmc_mcp.provenance`), the only place that
joins a file's bytes to the justifications that let it be written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from llmc_mcp.provenance.lineage import SealedOutputs, authentic_records
from llmc_mcp.reflection.schema import UNSAFE_CHAR
from llmc_mcp.reflection.store import JustificationStore, Record
from llmc_mcp.workspace import Workspace

Confidence = Literal["low", "medium", "high"]
_RANK = {"low": 0, "medium": 1, "high": 2}


class Selection(BaseModel):
    """Which records a report shows; every field narrows, none set shows all."""

    domain: str | None = None
    newer_than_days: float | None = Field(None, ge=0)
    older_than_days: float | None = Field(None, ge=0)
    min_confidence: Confidence | None = None
    keys: list[str] | None = None

    def keeps(self, record: Record, now: datetime) -> bool:
        age = now - datetime.fromisoformat(record.created_at)
        if self.domain is not None and record.domain != self.domain:
            return False
        if self.keys is not None and record.key not in self.keys:
            return False
        if self.newer_than_days is not None and age > timedelta(days=self.newer_than_days):
            return False
        if self.older_than_days is not None and age < timedelta(days=self.older_than_days):
            return False
        wanted = _RANK[self.min_confidence] if self.min_confidence else 0
        return _RANK[record.justification.confidence] >= wanted


class DecisionEntry(BaseModel):
    """One stored decision, with its full reasoning and the outputs it stands behind."""

    hash: str
    domain: str
    operation: str
    decision: dict[str, Any]
    choice: str
    confidence: str
    intent: str
    rationale: str
    tradeoffs: str
    alternatives: list[dict[str, str]]
    created_at: str
    answered_by: str | None = Field(
        description="Who wrote it when not the agent: 'sampling: <model>' for the host's model."
    )
    review: dict[str, Any] | None = Field(
        description="The user's approval, when --min-confidence asked for one."
    )
    outputs: list[str] = Field(
        description="Workspace files whose provenance record cites this justification of the decision."
    )
    status: Literal["current", "superseded", "revoked"] = Field(
        "current",
        description="'superseded': replaced by a newer justification of the same decision (its writer's); "
        "'revoked': withdrawn by the workspace's owner. Outputs listed under such an entry were made "
        "under reasoning that no longer stands.",
    )
    superseded_by: dict[str, Any] | None = Field(
        None, description="The successor's created_at and digest, or when and by whom it was revoked."
    )
    supersedes: dict[str, Any] | None = Field(
        None, description="The record this one replaced: its created_at, digest and file."
    )


def every_record(store: JustificationStore) -> Iterable[Record]:
    """The current records and the superseded or revoked ones kept beside them."""
    yield from store.records()
    yield from store.superseded_records()


def decisions(
    records: Iterable[Record],
    workspace: Workspace,
    outputs: SealedOutputs,
    selection: Selection | None = None,
) -> list[DecisionEntry]:
    """The selected records, oldest first, each with the outputs whose records cite it (the records
    ``outputs`` says the server sealed).

    An output's provenance names the justification it was made under by key and ``justified_at``:
    outputs are listed under that very record, so those made under a superseded or revoked one are
    shown under it, not credited to its successor. A record citing a key without a time (written
    before times were recorded) counts for the current record.
    """
    now = datetime.now(UTC)
    chosen = [r for r in records if selection is None or selection.keeps(r, now)]
    behind = _outputs_by_decision(workspace, outputs) if chosen else {}
    return [
        DecisionEntry(
            hash=r.key,
            domain=r.domain,
            operation=r.operation,
            decision=r.prompt_args,
            choice=r.justification.choice.method,
            confidence=r.justification.confidence,
            intent=r.justification.intent,
            rationale=r.justification.choice.rationale,
            tradeoffs=r.justification.choice.tradeoffs,
            alternatives=[a.model_dump() for a in r.justification.alternatives],
            created_at=r.created_at,
            answered_by=r.answered_by,
            review=r.review,
            outputs=sorted(
                behind.get((r.key, r.created_at), set())
                | (behind.get((r.key, None), set()) if r.superseded_by is None else set())
            ),
            status=_status(r),
            superseded_by=r.superseded_by,
            supersedes=r.supersedes,
        )
        for r in sorted(chosen, key=lambda r: r.created_at)
    ]


def _status(record: Record) -> Literal["current", "superseded", "revoked"]:
    if record.superseded_by is None:
        return "current"
    return "revoked" if "revoked_at" in record.superseded_by else "superseded"


def to_markdown(entries: list[DecisionEntry], workspace: Workspace) -> str:
    """A report a reviewer reads without the session: each decision, why, and what it produced.

    Every value is text someone sent (an agent, the host's model, a client's review, a file's name)
    and is rendered on one line by :func:`markdown_text` (Markdown characters escaped) or
    :func:`markdown_code`, so no justification can add a heading, a list item or an "Approved by the
    user" line to the report.
    """
    md = markdown_text
    lines = [
        f"# Decisions behind the outputs of {md(str(workspace.root))}",
        "",
        f"{len(entries)} decision(s); generated {datetime.now(UTC).isoformat(timespec='seconds')}.",
    ]
    for entry in entries:
        lines += [
            "",
            f"## {entry.domain}: {md(entry.choice)} ({md(entry.operation)})",
            "",
            f"- **Decision:** {markdown_code(_args(entry.decision))}; key `{_key(entry.hash)}`",
            f"- **Justified:** {md(entry.created_at)}, confidence {md(entry.confidence)}, by "
            f"{md(entry.answered_by or 'the agent')}",
            f"- **Intent:** {md(entry.intent)}",
            f"- **Rationale:** {md(entry.rationale)}",
            f"- **Trade-offs:** {md(entry.tradeoffs)}",
        ]
        lines += [f"- **Rejected {md(a['method'])}:** {md(a['why_not'])}" for a in entry.alternatives]
        if entry.review is not None:
            lines.append(
                f"- **Approved by the user:** {md(str(entry.review.get('at')))} "
                f"{md(str(entry.review.get('comment') or ''))}"
            )
        if entry.status != "current" and entry.superseded_by is not None:
            lines.append(f"- **{entry.status.capitalize()}:** {md(_successor(entry.superseded_by))}")
        outputs = ", ".join(markdown_code(o) for o in entry.outputs) or "none in the workspace now"
        label = "Outputs" if entry.status == "current" else f"Outputs made under this {entry.status} one"
        lines.append(f"- **{label}:** {outputs}")
    return "\n".join(lines) + "\n"


_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]<>&|~!#])")
"""What can open structure inside one line: emphasis, code, links and images, HTML and entities,
table cells, strikethrough, and the closing ``#`` run of a heading. Line-start markers (``-``, ``1.``,
``>``) cannot occur: every text follows a label on its line."""
_LINE_BREAK = re.compile(r"\r\n|[\r\n\t\v\f]")


def markdown_text(text: str) -> str:
    """``text`` as inline Markdown that renders as exactly these characters, on one line.

    Every character that could open structure within a line is backslash-escaped (CommonMark escapes
    any ASCII punctuation), and the result is :func:`one_line`.
    """
    return one_line(_MARKDOWN_PUNCTUATION.sub(r"\\\1", text))


def markdown_code(text: str) -> str:
    """``text`` as one inline code span: fenced by more backticks than any run inside it (CommonMark)."""
    line = one_line(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if line[:1] in ("`", " ") or line[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def one_line(text: str) -> str:
    """``text`` on one line: line breaks shown as ``⏎``, characters text may not hold by code point.

    For every place a stored text is shown to a person among lines of the server's own (a review
    form, a report), so that the text cannot pose as one of those lines.
    """
    folded = _LINE_BREAK.sub(" ⏎ ", text)
    return UNSAFE_CHAR.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", folded)


def _successor(link: dict[str, Any]) -> str:
    if "revoked_at" in link:
        return f"revoked {link.get('revoked_at')} by {link.get('by')}; the decision is asked for again"
    return f"replaced {link.get('created_at')} by a newer justification of the same decision"


def _key(key: str) -> str:
    """A record's key for a code span; keys are checked ``sha256:<hex>`` when read, so this changes none."""
    return re.sub(r"[^0-9a-z:]", "", key)


def _args(decision: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in decision.items())


def _outputs_by_decision(
    workspace: Workspace, outputs: SealedOutputs
) -> dict[tuple[str, str | None], set[str]]:
    behind: dict[tuple[str, str | None], set[str]] = {}
    for content in authentic_records(workspace, outputs).values():
        for item in content.get("x-llmc:justifications", []):
            if isinstance(item, dict) and isinstance(item.get("key"), str):
                when = item.get("justified_at") if isinstance(item.get("justified_at"), str) else None
                behind.setdefault((item["key"], when), set()).add(str(content["output"]["path"]))
    return behind
