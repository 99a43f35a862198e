"""Workflow definitions: the pydantic models of a YAML file (strict: an unknown key is a problem),
and the problems found in one. :mod:`.loading` reads the files; :mod:`.validate` checks the graph and
the templates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmc_mcp.operations.workflows.models import WorkflowAnswerKind

IDENTIFIER = r"^[a-z][a-z0-9_]{0,63}$"
AnswerKind = WorkflowAnswerKind


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class InputSpec(_Strict):
    name: str = Field(pattern=IDENTIFIER)
    description: str = Field(min_length=1, max_length=500)


class Test(_Strict):
    """A condition on a saved value: the rendered ``value`` equals one text, or is one of several.

    Numbers in the YAML compare as their text; YAML's ``yes``/``no`` are booleans and are refused
    (quote them), since a saved value is never a boolean.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, coerce_numbers_to_str=True)

    value: str = Field(
        min_length=1, description="A template, usually one reference: '${routing.choice.method}'."
    )
    equals: str | None = None
    in_: list[str] | None = Field(None, alias="in", min_length=1)

    @model_validator(mode="after")
    def _one_comparison(self) -> Test:
        if (self.equals is None) == (self.in_ is None):
            raise ValueError("a condition has exactly one of 'equals' or 'in'")
        return self

    def holds(self, rendered: str) -> bool:
        wanted = [self.equals] if self.equals is not None else list(self.in_ or [])
        return rendered.strip().lower() in {w.strip().lower() for w in wanted}


class Branch(_Strict):
    """One way out of a step: ``goto`` when ``if`` holds; the last branch has no ``if``."""

    if_: Test | None = Field(None, alias="if")
    goto: str = Field(pattern=IDENTIFIER)


class Requirement(_Strict):
    """The decision a step's answer justifies, derived as the operation's own gate would derive it.

    ``args`` are the operation's arguments as templates (``${answer.choice.method}`` is the answer
    being submitted); the decision args come from the operation's reflection spec for ``domain``,
    with the facts its preflight reads from the data. So the record stored is the one the later call
    of that operation looks up.
    """

    domain: str
    operation: str
    args: dict[str, Any] = Field(default_factory=dict)


class Step(_Strict):
    id: str = Field(pattern=IDENTIFIER)
    instruction: str = Field(min_length=1, max_length=20_000)
    save: str | None = Field(None, pattern=IDENTIFIER)
    answer: AnswerKind | None = None
    """Default: ``justification`` for a step with ``requires``, else ``text``."""
    next: str | list[Branch] | None = None
    """A step id, or branches tried in order; none: the next step in the file."""
    foreach: str | None = None
    """A saved list (or an input): the step is asked once per item, its answers saved as a list."""
    as_: str = Field("item", alias="as", pattern=IDENTIFIER)
    requires: Requirement | None = None
    complete: bool = False

    @property
    def answer_kind(self) -> AnswerKind:
        if self.answer is not None:
            return self.answer
        return "justification" if self.requires is not None else "text"


class Workflow(_Strict):
    name: str = Field(pattern=IDENTIFIER)
    description: str = Field(min_length=1, max_length=2000)
    inputs: list[InputSpec] = Field(default_factory=list)
    steps: list[Step] = Field(min_length=1, max_length=100)

    def step(self, step_id: str) -> Step:
        return next(s for s in self.steps if s.id == step_id)

    def index(self, step_id: str) -> int:
        return next(i for i, s in enumerate(self.steps) if s.id == step_id)


@dataclass(frozen=True)
class Problem:
    """What is wrong with a definition, where: ``file``, the step (if one), the problem."""

    file: str
    step: str | None
    problem: str

    def __str__(self) -> str:
        where = f"{self.file}: step {self.step!r}" if self.step else self.file
        return f"{where}: {self.problem}"


class DefinitionError(ValueError):
    """A definition that cannot be used; ``problems`` lists everything wrong with it at once."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems
