"""Loading workflow definitions safely: the shipped ones and a workspace's own.

A definition is data a user writes (``<workspace>/.llmc/workflows/*.yaml``) or the package ships
(``builtin/``). Workers can write that folder too, so a file there is hostile input: it is read with
:class:`_DefinitionLoader` only (YAML's safe schema, no tags that build objects, no anchors or aliases,
nesting at most :data:`MAX_DEPTH` deep), bounded in size, and checked by :mod:`.validate` before
anything runs it. Every problem names the file, the step and what is wrong; whatever goes wrong with
one user file puts that file under ``skipped`` and never touches the others.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from llmc_mcp.operations.workflows.definitions import DefinitionError, Problem, Workflow
from llmc_mcp.operations.workflows.validate import check_workflow

MAX_FILE_BYTES = 256 * 1024


MAX_USER_FILES = 200
"""Files read from the user folder; the rest are reported, not read."""


MAX_USER_BYTES = 2 * 1024 * 1024
"""Bytes of user files a catalog reads, in all: files past it are reported, not parsed (the pure-Python
parser takes about 0.25 s per MiB; 200 files of the largest size took seconds on every call)."""


MAX_PROBLEMS_PER_FILE = 20
"""Problems listed for one skipped file (a 256 KB file can have thousands)."""


MAX_DEPTH = 32
"""Nesting of YAML collections: a definition needs about 8; 5,000 levels overflowed the parser's
recursion (``RecursionError``) and so escaped every check."""


class _DefinitionLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without anchors and aliases, and with collections at most :data:`MAX_DEPTH` deep.

    An alias is a reference, so a few hundred bytes of aliases to aliases (the "billion laughs")
    stand for billions of values once anything walks or copies the document (a state freezes the
    definition into JSON): an 878-byte file took a server to 4.7 GB. Nothing a definition says needs
    one, so they are refused where the composer meets them, before any node is built. The depth is
    checked there too, since the composer recurses once per level.
    """

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            refused = "anchors and aliases (&name, *name, <<) are not allowed; write the values out"
            raise yaml.composer.ComposerError(None, None, refused, event.start_mark)
        if self._depth >= MAX_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested more than {MAX_DEPTH} levels deep", event.start_mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def parse_definition(text: str, file: str) -> Workflow:
    """A validated workflow from YAML text, or :class:`DefinitionError` naming every problem."""
    if len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise DefinitionError([Problem(file, None, f"larger than {MAX_FILE_BYTES} bytes")])
    loader = _DefinitionLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        raise DefinitionError([Problem(file, None, f"bad YAML: {_yaml_reason(exc)}")]) from None
    finally:
        loader.dispose()
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
    """The workflow of one file; whatever goes wrong (unreadable, too big, bad YAML, too deep, a bug
    of ours it trips) is a :class:`DefinitionError` naming the file, never another exception."""
    return _parse_file(path, _read(path))


def _read(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise DefinitionError([Problem(path.name, None, f"{size} bytes, over {MAX_FILE_BYTES}")])
        with path.open("rb") as handle:  # the file may grow between the stat and the read
            raw = handle.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise DefinitionError([Problem(path.name, None, f"over {MAX_FILE_BYTES} bytes")])
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError([Problem(path.name, None, f"cannot be read ({exc})")]) from None


def _parse_file(path: Path, text: str) -> Workflow:
    try:
        return parse_definition(text, path.name)
    except DefinitionError:
        raise
    except Exception as exc:  # one hostile file must cost only itself, whatever it trips
        reason = f"could not be loaded ({type(exc).__name__}: {str(exc)[:200]})"
        raise DefinitionError([Problem(path.name, None, reason)]) from None


@functools.cache
def builtin_workflows() -> dict[str, Workflow]:
    """The workflows shipped in the package; one that does not validate is a bug, so it raises.

    Read once per process: they cannot change under a running server (copy before adding to it).
    """
    found: dict[str, Workflow] = {}
    shipped = resources.files("llmc_mcp.operations.workflows").joinpath("builtin")
    for entry in sorted(shipped.iterdir(), key=str):
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


class ParsedFiles:
    """User definitions already parsed, by file identity, so a call that lists the folder parses only
    what changed (a server reads the folder on every ``list``, ``describe`` and ``start``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parsed: dict[str, tuple[tuple[int, ...], Workflow | DefinitionError]] = {}

    def get(self, path: Path, identity: tuple[int, ...]) -> Workflow | DefinitionError | None:
        with self._lock:
            found = self._parsed.get(path.name)
        return found[1] if found is not None and found[0] == identity else None

    def put(self, path: Path, identity: tuple[int, ...], result: Workflow | DefinitionError) -> None:
        with self._lock:
            self._parsed[path.name] = (identity, result)

    def keep_only(self, names: set[str]) -> None:
        with self._lock:
            for name in set(self._parsed) - names:
                del self._parsed[name]


def load_catalog(user_dir: Path, parsed: ParsedFiles | None = None) -> Catalog:
    """Built-ins plus the user's definitions; a bad user file is reported and skipped, never fatal.

    Whatever one file does (too big, bad YAML, aliases, nested too deep, an exception of any kind) puts
    that file under ``problems`` and leaves every other workflow as it was. Files past
    :data:`MAX_USER_BYTES` in all (in name order) are reported, not read; ``parsed`` remembers files
    parsed before, so a call parses only what changed.
    """
    workflows = dict(builtin_workflows())
    builtin = frozenset(workflows)
    problems: list[Problem] = []
    parsed = parsed if parsed is not None else ParsedFiles()
    budget = MAX_USER_BYTES
    seen: set[str] = set()
    for path in _user_files(user_dir, problems):
        seen.add(path.name)
        try:
            info = path.stat()
            identity = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
            if info.st_size <= MAX_FILE_BYTES:  # a larger one is refused by its size alone, unread
                if info.st_size > budget:
                    over = f"not read: the folder's files take more than {MAX_USER_BYTES} bytes in all"
                    problems.append(Problem(path.name, None, over))
                    continue
                budget -= info.st_size
            result = parsed.get(path, identity)
            if result is None:
                try:
                    result = _parse_file(path, _read(path))
                except DefinitionError as exc:
                    result = exc
                parsed.put(path, identity, result)
        except OSError as exc:
            result = DefinitionError([Problem(path.name, None, f"cannot be read ({exc.strerror})")])
        if isinstance(result, DefinitionError):
            problems.extend(_first_problems(path.name, result.problems))
            continue
        workflow = result
        if workflow.name in workflows:
            owner = "a built-in workflow" if workflow.name in builtin else "another file"
            problems.append(Problem(path.name, None, f"the name {workflow.name!r} is taken by {owner}"))
            continue
        workflows[workflow.name] = workflow
    parsed.keep_only(seen)
    return Catalog(workflows, builtin, tuple(problems))


def _first_problems(file: str, problems: list[Problem]) -> list[Problem]:
    """At most :data:`MAX_PROBLEMS_PER_FILE` of a file's problems, and how many more there are: a list
    of 200 skipped files must stay an answer, not megabytes (the command line's validate shows all)."""
    if len(problems) <= MAX_PROBLEMS_PER_FILE:
        return problems
    more = len(problems) - MAX_PROBLEMS_PER_FILE
    note = f"and {more} more problems (llmc-mcp workflows validate FILE lists them all)"
    return [*problems[:MAX_PROBLEMS_PER_FILE], Problem(file, None, note)]


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
