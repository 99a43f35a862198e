"""The texts llmc-mcp ships, for the copy check: a justification must be reasoning, not our prose.

An agent short of reasoning copies what it has read: the README, the demo's transcript, a stub, the
instructions, a workflow's steps. Copied with only the choice changed, the demo's justification of
EPSG:4326 for a web map said false things about EPSG:3857 and was stored. So every text field of a
justification is compared with every text the package ships, normalized to lowercase words:

- a field that repeats a passage of the shipped prose (README, stubs, instructions, workflow
  definitions, prompts, the demo) is refused;
- the example justifications (:mod:`.examples`) are the model answers of their own decisions: their
  text is refused in any justification but one of the very choice it argues for, so that the demo,
  which persists them for that choice, keeps working.

The corpus is read once per process from the installed package and its metadata (the README is
the package's long description), so it is the text this very version ships.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from importlib import resources

from llmc_mcp.reflection.examples import EXAMPLE_JUSTIFICATIONS

PROSE_MIN_WORDS = 6
"""A field this long repeated verbatim from shipped prose is a copy, not a coincidence."""
EXAMPLE_MIN_WORDS = 4
"""An example's field is its own sentence: four words of it (MIN_WORDS' floor) are a copy."""
_PACKAGE_TEXTS = (
    ("stubs/templates", ".tmpl"),
    ("operations/workflows/builtin", ".yaml"),
    ("reflection/prompts", ".md"),
    ("server", "instructions.py"),
    ("cli", "demo.py"),
)


def normalized(text: str) -> str:
    """Lowercase words separated by single spaces: punctuation, case and layout do not hide a copy."""
    return " ".join(re.findall(r"\w+", text.lower()))


def copy_problem(path: str, text: str, domain: str, method: str) -> str | None:
    """Why the field at ``path`` is a copy of shipped text, or None.

    ``domain`` and ``method`` (normalized by the caller) are the decision being justified, which an
    example's own text may justify.
    """
    own = normalized(text)
    words = len(own.split())
    if words >= EXAMPLE_MIN_WORDS:
        for example_domain, example_method, example_text, shown in _example_fields():
            if own in example_text and (example_domain, example_method) != (domain, method):
                return (
                    f"{path}: copies the example justification of {shown!r} ({example_domain}) "
                    "that llmc-mcp ships; it argues for that choice, not this one: write your own reasoning"
                )
    if words >= PROSE_MIN_WORDS and own in _prose():
        return f"{path}: repeats text llmc-mcp ships (README, stubs, instructions); write your own reasoning"
    return None


@functools.cache
def _example_fields() -> tuple[tuple[str, str, str, str], ...]:
    """(domain, normalized chosen method, normalized text, the method as written) of every text field
    of every shipped example."""
    found = []
    for domain, example in EXAMPLE_JUSTIFICATIONS.items():
        shown = example["choice"]["method"]
        method = normalized(shown)
        texts = [example["intent"], example["choice"]["rationale"], example["choice"]["tradeoffs"]]
        texts += [alternative["why_not"] for alternative in example["alternatives"]]
        found += [(domain, method, normalized(text), shown) for text in texts]
    return tuple(found)


@functools.cache
def _prose() -> str:
    """Every shipped text but the examples' own sentences, normalized, one text per file (``|``)."""
    texts = [_readme()]
    root = resources.files("llmc_mcp")
    for folder, suffix in _PACKAGE_TEXTS:
        for entry in sorted(root.joinpath(folder).iterdir(), key=lambda e: e.name):
            if entry.name.endswith(suffix):
                texts.append(entry.read_text(encoding="utf-8"))
    prose = " | ".join(normalized(text) for text in texts)
    for _, _, example, _ in _example_fields():
        prose = prose.replace(example, " | ")
    return prose


def _readme() -> str:
    try:
        metadata = importlib.metadata.metadata("llmc-mcp")
    except importlib.metadata.PackageNotFoundError:
        return ""
    return metadata.get_payload() or metadata.get("Description") or ""  # type: ignore[attr-defined]
