from typing import Literal, TypedDict
class Alternative(TypedDict):
    method: str  # an option you rejected; never the chosen value
    why_not: str  # at least 3 words
class Choice(TypedDict):
    method: str  # must equal the value being justified (normalized: "epsg:4326" == "EPSG:4326")
    rationale: str  # at least 4 words
    tradeoffs: str  # at least 3 words
class Justification(TypedDict):
    intent: str  # what the output is for and what it must preserve; at least 4 words
    alternatives: list[Alternative]  # 1 to 10 rejected options
    choice: Choice
    confidence: Literal["low", "medium", "high"]
class PersistResult(TypedDict):
    persisted: bool
    hash: str
    domain: str
    operation: str
    prompt: str
def persist(
    hash: str, domain: str, justification: Justification, supersede: bool = False
) -> PersistResult:
    """Store a justification for one hint (hash and domain exactly as in the hint).
    Validated server-side, every problem at once: ApiError(type="justification_invalid")
    with details["errors"]. Each text is your own reasoning about this data: the
    minimum words above, no <placeholder> left from the prompt's example, no text
    copied from the prompt or any example llmc-mcp ships. A hash not issued to this
    session is refused (run the operation first); a decision already justified raises
    ApiError(type="record_exists"): just repeat the operation. If a justification this
    session stored is wrong, persist the right one with supersede=True (no hint needed;
    the old record is kept, marked superseded). Size limit: 16000 characters.
    """
    ...
