from typing import Any, Literal, TypedDict
class Alternative(TypedDict):
    method: str  # an option you rejected; never the chosen value
    why_not: str  # at least 3 words
class ReportEntry(TypedDict):
    hash: str
    domain: str
    operation: str
    decision: dict[str, Any]
    choice: str
    confidence: str
    intent: str
    rationale: str
    tradeoffs: str
    alternatives: list[Alternative]
    created_at: str
    answered_by: str | None  # "sampling: <model>" when the host's model wrote it; None: the agent
    review: dict[str, Any] | None  # the user's approval, when --min-confidence asked for one
    outputs: list[str]  # workspace files whose provenance record cites this justification
    status: Literal["current", "superseded", "revoked"]  # outputs under a non-current one: redo them
    superseded_by: dict[str, Any] | None  # the successor's created_at, or when it was revoked
    supersedes: dict[str, Any] | None  # the record this one replaced
def report() -> list[ReportEntry]:
    """The justifications stored in this workspace, oldest first, each with the outputs it is behind."""
    ...
