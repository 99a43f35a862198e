"""Reflection prompt templates: loaded from ``prompts/*.md``, rendered with ``string.Template``.

Templates use ``$name`` placeholders rather than ``str.format`` so the JSON
example inside each prompt needs no brace escaping. A template's hash is part
of every cache key derived from it: editing a prompt's text invalidates the
justifications given in answer to the old text.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from llmc_mcp.errors import InvalidArgument, NotFound

_FRONT_MATTER = re.compile(r"\A---\n(?P<meta>.*?)\n---\n(?P<body>.*)\Z", re.S)
_EXAMPLE = re.compile(r"```json\n(?P<json>.*?)\n```", re.S)
_DISPLAY_LIMIT = 120


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    description: str
    arguments: tuple[str, ...]
    text: str

    @property
    def hash(self) -> str:
        return "sha256:" + hashlib.sha256(self.text.encode()).hexdigest()

    def render(self, args: Mapping[str, Any]) -> str:
        missing = [a for a in self.arguments if a not in args]
        if missing:
            raise InvalidArgument(
                f"Prompt {self.name} needs the arguments {', '.join(missing)}.",
                fix=f"Call it with {', '.join(f'{a}=...' for a in self.arguments)}.",
            )
        unknown = sorted(set(args) - set(self.arguments))
        if unknown:
            raise InvalidArgument(
                f"Prompt {self.name} has no argument {', '.join(unknown)}.",
                fix=f"Its arguments are: {', '.join(self.arguments)}.",
            )
        values = {k: _display(str(args[k])) for k in self.arguments}
        return string.Template(self.text).safe_substitute(values).strip()

    def example(self, args: Mapping[str, Any]) -> Any:
        """The JSON example of the rendered prompt, parsed (tests prove it validates)."""
        match = _EXAMPLE.search(self.render(args))
        if match is None:
            raise ValueError(f"prompt {self.name} has no ```json example")
        return json.loads(match["json"])

    @classmethod
    def parse(cls, name: str, source: str) -> PromptTemplate:
        match = _FRONT_MATTER.match(source)
        if match is None:
            raise ValueError(f"prompt {name}: missing '---' front matter")
        meta = dict(line.split(":", 1) for line in match["meta"].splitlines() if line.strip() and ":" in line)
        arguments = tuple(a.strip() for a in meta.get("arguments", "").split(",") if a.strip())
        return cls(name, meta.get("description", "").strip(), arguments, match["body"])


def _display(value: str) -> str:
    """Long definitions (a custom WKT) are named, not pasted, to keep prompts short."""
    if len(value) <= _DISPLAY_LIMIT:
        return value
    label = re.search(r'^\w+\["([^"]+)"', value)
    name = label.group(1) if label else value[:40]
    return f"the custom CRS '{name}' (as you passed it)"


class PromptLibrary:
    """The set of prompts a gate renders and hashes; tests build libraries with edited text."""

    def __init__(self, templates: Iterable[PromptTemplate]):
        self._templates = {t.name: t for t in templates}

    @classmethod
    def default(cls) -> PromptLibrary:
        folder = resources.files("llmc_mcp.reflection") / "prompts"
        templates = [
            PromptTemplate.parse(entry.name.removesuffix(".md"), entry.read_text(encoding="utf-8"))
            for entry in sorted(folder.iterdir(), key=lambda e: e.name)
            if entry.name.endswith(".md")
        ]
        return cls(templates)

    def __iter__(self):
        return iter(self._templates.values())

    def names(self) -> list[str]:
        return sorted(self._templates)

    def get(self, name: str) -> PromptTemplate:
        try:
            return self._templates[name]
        except KeyError:
            raise NotFound(
                f"No prompt named {name!r}.", fix=f"Known prompts: {', '.join(self.names())}."
            ) from None

    def replace(self, template: PromptTemplate) -> PromptLibrary:
        return PromptLibrary([*(t for t in self if t.name != template.name), template])
