"""The template language of workflow instructions: substitution only, never evaluation.

``${name}``, ``${name[0]}``, ``${name.field}`` (and chains of them, ``${parts[1].title}``) substitute a
saved value; ``${foreach item in list}...${/foreach}`` repeats its body for each item of a list. A
definition is data written by a user, so nothing in a template can run code: a reference is a name
followed by keys and indexes, and that is all the parser accepts.

Nor can a template make the server work without end: loops nest at most :data:`MAX_FOREACH_DEPTH`
deep and a template holds at most :data:`MAX_LOOPS` of them (refused when the definition is loaded),
and a render stops with a :class:`TemplateError` past :data:`MAX_RENDER_STEPS` references and loop
turns, :data:`MAX_RENDERED_CHARS` characters, or its :class:`Budget`'s deadline. Six loops nested
over a 50-item answer once rendered 50**6 times, with no output to trip a size check, for ever.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_NAME = r"[A-Za-z][A-Za-z0-9_]*"
"""No leading underscore: nothing a template names looks like a Python internal (``__class__``)."""
_PATH = re.compile(rf"\A({_NAME})((?:\.{_NAME}|\[\d+\])*)\Z")
_PART = re.compile(rf"\.({_NAME})|\[(\d+)\]")
_TAG = re.compile(r"\$\{([^{}]*)\}")
_FOREACH = re.compile(rf"\Aforeach\s+({_NAME})\s+in\s+(.+?)\s*\Z")
MAX_RENDERED_CHARS = 200_000
"""A rendered instruction past this is refused: a foreach over a long list inside another is a bug."""
MAX_FOREACH_DEPTH = 3
"""Loops inside loops: a table of rows of cells is three; deeper nests multiply every list's length."""
MAX_LOOPS = 20
"""``${foreach}`` tags in one template."""
MAX_RENDER_STEPS = 100_000
"""References substituted plus loop turns in one render (or one :class:`Budget`): about 0.1 s of work."""


class TemplateError(ValueError):
    """A template that cannot be parsed, or names a value that is not there when rendered."""


@dataclass(frozen=True)
class Ref:
    """``${name.field[0]}``: a root name and the keys (str) and indexes (int) after it."""

    name: str
    path: tuple[str | int, ...]
    text: str


@dataclass(frozen=True)
class Loop:
    variable: str
    source: Ref
    body: tuple[Node, ...]


Node = str | Ref | Loop


@dataclass
class Budget:
    """What renders may still spend: steps (references and loop turns) and time (a monotonic deadline).

    One budget may be shared by every render of a call, so the call as a whole is bounded.
    """

    steps: int = MAX_RENDER_STEPS
    deadline: float | None = None
    spent: int = field(default=0, init=False)

    @classmethod
    def for_seconds(cls, seconds: float, steps: int = MAX_RENDER_STEPS) -> Budget:
        return cls(steps=steps, deadline=time.monotonic() + seconds)

    def spend(self) -> None:
        self.spent += 1
        if self.spent > self.steps:
            raise TemplateError(
                f"rendering took over {self.steps} substitutions and loop turns (a foreach over long lists "
                "inside another); the definition must loop over less"
            )
        if self.deadline is not None and self.spent % 256 == 0 and time.monotonic() > self.deadline:
            raise TemplateError("rendering ran past the call's deadline; the definition must loop over less")


def parse_ref(text: str) -> Ref:
    text = text.strip()
    match = _PATH.match(text)
    if match is None:
        raise TemplateError(
            f"'${{{text}}}' is not a reference: write a name, then .field or [index] parts "
            "(${parts[0]}, ${crs.choice.method}); nothing is evaluated"
        )
    path: list[str | int] = []
    for key, index in _PART.findall(match.group(2)):
        path.append(key if key else int(index))
    return Ref(match.group(1), tuple(path), text)


def parse(template: str) -> tuple[Node, ...]:
    """The template as text, references and loops; a malformed one is a :class:`TemplateError`."""
    stack: list[tuple[str, Ref | None, list[Node]]] = [("", None, [])]
    position = loops = 0
    for tag in _TAG.finditer(template):
        if tag.start() > position:
            stack[-1][2].append(template[position : tag.start()])
        position = tag.end()
        inner = tag.group(1).strip()
        loop = _FOREACH.match(inner)
        if loop is not None:
            loops += 1
            if len(stack) > MAX_FOREACH_DEPTH:
                raise TemplateError(f"foreach loops nest more than {MAX_FOREACH_DEPTH} deep")
            if loops > MAX_LOOPS:
                raise TemplateError(f"more than {MAX_LOOPS} foreach loops in one template")
            stack.append((loop.group(1), parse_ref(loop.group(2)), []))
        elif inner == "/foreach":
            if len(stack) == 1:
                raise TemplateError("'${/foreach}' without an opening '${foreach item in list}'")
            variable, source, body = stack.pop()
            assert source is not None
            stack[-1][2].append(Loop(variable, source, tuple(body)))
        elif inner.startswith("foreach"):
            raise TemplateError(f"'${{{inner}}}': write '${{foreach item in list}}'")
        else:
            stack[-1][2].append(parse_ref(inner))
    rest = template[position:]
    if "${" in rest:
        raise TemplateError("an unclosed '${' (every reference ends with '}')")
    if rest:
        stack[-1][2].append(rest)
    if len(stack) > 1:
        raise TemplateError(f"'${{foreach {stack[-1][0]} in ...}}' is never closed with '${{/foreach}}'")
    return tuple(stack[0][2])


def names(template: str) -> set[str]:
    """The root names a template reads from saved values (loop variables excluded)."""
    found: set[str] = set()

    def visit(nodes: tuple[Node, ...], bound: frozenset[str]) -> None:
        for node in nodes:
            if isinstance(node, Ref) and node.name not in bound:
                found.add(node.name)
            elif isinstance(node, Loop):
                if node.source.name not in bound:
                    found.add(node.source.name)
                visit(node.body, bound | {node.variable})

    visit(parse(template), frozenset())
    return found


def lookup(ref: Ref, values: Mapping[str, Any]) -> Any:
    """The value a reference names; a clear :class:`TemplateError` when it is not there."""
    if ref.name not in values:
        raise TemplateError(f"'${{{ref.text}}}': no value named {ref.name!r} has been saved")
    value = values[ref.name]
    walked = ref.name
    for part in ref.path:
        if isinstance(part, int):
            if not isinstance(value, list) or part >= len(value):
                size = f"a list of {len(value)}" if isinstance(value, list) else f"a {_kind(value)}"
                raise TemplateError(f"'${{{ref.text}}}': {walked} is {size}, it has no item [{part}]")
            value = value[part]
            walked += f"[{part}]"
        else:
            if not isinstance(value, dict) or part not in value:
                raise TemplateError(f"'${{{ref.text}}}': {walked} has no field {part!r}")
            value = value[part]
            walked += f".{part}"
    return value


def render(template: str, values: Mapping[str, Any], budget: Budget | None = None) -> str:
    """The template with every reference substituted; lists and objects are written as JSON.

    Bounded by ``budget`` (a fresh one when None) and by :data:`MAX_RENDERED_CHARS`."""
    out = _Output(budget if budget is not None else Budget())
    out.render(parse(template), dict(values))
    return "".join(out.parts)


def render_value(template: Any, values: Mapping[str, Any], budget: Budget | None = None) -> Any:
    """A template that is exactly one reference yields the value itself (a number stays a number)."""
    if not isinstance(template, str):
        return template
    nodes = parse(template)
    if len(nodes) == 1 and isinstance(nodes[0], Ref):
        return lookup(nodes[0], values)
    return render(template, values, budget)


class _Output:
    """The text rendered so far, its length kept as it grows (the limit is checked on every part)."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self.parts: list[str] = []
        self.chars = 0

    def add(self, text: str) -> None:
        self.chars += len(text)
        if self.chars > MAX_RENDERED_CHARS:
            raise TemplateError(f"the rendered text is over {MAX_RENDERED_CHARS} characters")
        self.parts.append(text)

    def render(self, nodes: tuple[Node, ...], values: dict[str, Any]) -> None:
        for node in nodes:
            if isinstance(node, str):
                self.add(node)
                continue
            self.budget.spend()
            if isinstance(node, Ref):
                self.add(show(lookup(node, values)))
                continue
            items = lookup(node.source, values)
            if not isinstance(items, list):
                raise TemplateError(
                    f"'${{foreach {node.variable} in {node.source.text}}}': "
                    f"{node.source.text} is a {_kind(items)}, not a list"
                )
            for item in items:
                self.budget.spend()
                self.render(node.body, {**values, node.variable: item})


def show(value: Any) -> str:
    """A value as instruction text: strings as they are, everything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "text"}.get(type(value), type(value).__name__)
