"""Workflow definitions: the pydantic models of a YAML file, and loading them safely.

A definition is data a user writes (``<workspace>/.llmc/workflows/*.yaml``) or the package ships
(``builtin/``). It is read with ``yaml.safe_load`` only (no tags that build objects), bounded in
size, and checked by :mod:`llmc_mcp.workflows.validate` before anything runs it. Every problem names
the file, the step and what is wrong.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from llmc_mcp.operations.models import WorkflowAnswerKind

MAX_FILE_BYTES = 256 * 1024
MAX_USER_FILES = 200
"""Files read from the user folder; the rest are reported, not read."""

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


def parse_definition(text: str, file: str) -> Workflow:
    """A validated workflow from YAML text, or :class:`DefinitionError` naming every problem."""
    import yaml

    from llmc_mcp.workflows.validate import check_workflow

    if len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise DefinitionError([Problem(file, None, f"larger than {MAX_FILE_BYTES} bytes")])
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DefinitionError([Problem(file, None, f"bad YAML: {_yaml_reason(exc)}")]) from None
    if not isinstance(data, dict):
        raise DefinitionError(
            [Problem(file, None, "bad YAML: the document must be a mapping (name, steps...)")]
        )
    try:
        workflow = Workflow.model_validate(data)
    except ValidationError as exc:
        raise DefinitionError(
            [_model_problem(file, data, err) for err in exc.errors(include_url=False)]
        ) from None
    problems = check_workflow(workflow, file)
    if problems:
        raise DefinitionError(problems)
    return workflow


def load_file(path: Path) -> Workflow:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise DefinitionError([Problem(path.name, None, f"{size} bytes, over {MAX_FILE_BYTES}")])
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError([Problem(path.name, None, f"cannot be read ({exc})")]) from None
    return parse_definition(text, path.name)


@functools.cache
def builtin_workflows() -> dict[str, Workflow]:
    """The workflows shipped in the package; one that does not validate is a bug, so it raises.

    Read once per process: they cannot change under a running server (copy before adding to it).
    """
    found: dict[str, Workflow] = {}
    for entry in sorted(resources.files("llmc_mcp.workflows").joinpath("builtin").iterdir(), key=str):
        if entry.name.endswith((".yaml", ".yml")):
            workflow = parse_definition(entry.read_text(encoding="utf-8"), f"builtin/{entry.name}")
            found[workflow.name] = workflow
    return found


@dataclass(frozen=True)
class Catalog:
    """The workflows a server offers, and the user definitions it skipped, with why."""

    workflows: dict[str, Workflow]
    builtin: frozenset[str]
    problems: tuple[Problem, ...]


def load_catalog(user_dir: Path) -> Catalog:
    """Built-ins plus the user's definitions; a bad user file is reported and skipped, never fatal."""
    workflows = dict(builtin_workflows())
    builtin = frozenset(workflows)
    problems: list[Problem] = []
    for path in _user_files(user_dir, problems):
        try:
            workflow = load_file(path)
        except DefinitionError as exc:
            problems.extend(exc.problems)
            continue
        if workflow.name in workflows:
            owner = "a built-in workflow" if workflow.name in builtin else "another file"
            problems.append(Problem(path.name, None, f"the name {workflow.name!r} is taken by {owner}"))
            continue
        workflows[workflow.name] = workflow
    return Catalog(workflows, builtin, tuple(problems))


def _user_files(user_dir: Path, problems: list[Problem]) -> Iterator[Path]:
    """Regular files named ``*.yaml``/``*.yml`` directly in the folder, links that lead out refused."""
    try:
        entries = sorted(user_dir.iterdir())
    except FileNotFoundError:
        return
    except OSError as exc:
        problems.append(Problem(str(user_dir.name), None, f"the folder cannot be listed ({exc.strerror})"))
        return
    root = user_dir.resolve()
    count = 0
    for path in entries:
        if not path.name.endswith((".yaml", ".yml")):
            continue
        resolved = path.resolve()
        if resolved.parent != root or not resolved.is_file():
            problems.append(Problem(path.name, None, "not a regular file in the workflows folder (a link?)"))
            continue
        count += 1
        if count > MAX_USER_FILES:
            problems.append(Problem(path.name, None, f"more than {MAX_USER_FILES} files; not read"))
            continue
        yield path


def _yaml_reason(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return (
        f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(problem)
    )


def _model_problem(file: str, data: dict[str, Any], err: Any) -> Problem:
    """A pydantic error as a problem naming the step (by id when the step has one)."""
    loc = list(err.get("loc", ()))
    step: str | None = None
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        raw = data.get("steps") or []
        candidate = raw[loc[1]] if loc[1] < len(raw) else None
        step = (
            str(candidate.get("id"))
            if isinstance(candidate, dict) and candidate.get("id")
            else f"#{loc[1] + 1}"
        )
        loc = loc[2:]
    where = ".".join(str(part) for part in loc) or "definition"
    message = err.get("msg", "invalid")
    if err.get("type") == "extra_forbidden":
        message = "unknown key"
    elif err.get("type") == "missing":
        message = "required"
    return Problem(file, step, f"{where}: {re.sub(r'^Value error, ', '', message)}")
