"""Render the code-mode stubs from the operation catalog through ``llmc_mcp/stubs/templates/``.

A stub module per namespace: its ``Literal`` aliases, a ``TypedDict`` per
result model (nested models first), and a typed function per operation whose
docstring carries the operation's own text, its parameters' descriptions and
the reflection domains it can ask for. A per-function stub
(``read_stubs("raster.reproject")``) is the compact form an agent reads before
calling one function: one parameter a line with its description, the result
shapes it returns with only the conventions their names and types cannot say,
the summary, the errors paragraph and the reflection domains in one line. Because stubs, classic tools and
sandbox bindings all come from :data:`~llmc_mcp.operations.CATALOG`, they
cannot drift; ``tests`` prove the stub signatures equal the runtime ones.
"""

from __future__ import annotations

import ast
import inspect
import re
import string
import textwrap
import types
import typing
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from llmc_mcp.config import Settings
from llmc_mcp.operations import CATALOG, NAMESPACES, Operation
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.schema import MAX_JUSTIFICATION_CHARS, MIN_WORDS
from llmc_mcp.reflection.specs import DOMAINS
from llmc_mcp.sandbox.images import MAX_IMAGES, ShownImages

REFLECTION_FUNCTIONS = ("persist", "prompt", "report")
JOBS_FUNCTIONS = ("start", "status", "wait", "result", "cancel", "list")


def _template(name: str) -> string.Template:
    """A template shipped as package data beside this module.

    The templates live inside the package (not in a top-level folder mapped in by ``package-dir``), so a
    source checkout and an installed wheel have the same layout and either can be imported.
    """
    source = resources.files("llmc_mcp.stubs") / "templates" / name
    return string.Template(source.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class StubSet:
    """Rendered stub sources by module name, per function, and the index shown by ``read_stubs()``.

    A whole module documents every result shape with its long notes; ``raster.reproject`` alone is a
    compact fraction of the tokens, with only the aliases and result types that one function uses.
    ``reflection.persist`` (and prompt, report) are cut out of the reflection module.
    """

    modules: dict[str, str]
    functions: dict[str, str]
    index: str

    def get(self, name: str) -> str | None:
        """A module's stub (``raster``) or one function's (``raster.reproject``)."""
        name = name.strip().removesuffix(".py")
        return self.modules.get(name) or self.functions.get(name)

    @classmethod
    def render(cls, settings: Settings | None = None) -> StubSet:
        """The stubs; ``settings`` give the limits the ``jobs`` module states (defaults otherwise)."""
        modules = {
            namespace: _render_module(namespace, [op for op in CATALOG if op.namespace == namespace])
            for namespace in NAMESPACES
        }
        functions = {op.qualname: _render_function_stub(op) for op in CATALOG}
        modules["reflection"] = _render_reflection()
        functions.update(
            (f"reflection.{name}", _extract_function(modules["reflection"], "reflection", name))
            for name in REFLECTION_FUNCTIONS
        )
        modules["jobs"] = _render_jobs(settings or Settings())
        functions.update(
            (f"jobs.{name}", _extract_function(modules["jobs"], "jobs", name)) for name in JOBS_FUNCTIONS
        )
        lines = [_index_line(namespace) for namespace in NAMESPACES]
        lines.append(
            f"- reflection: {', '.join(REFLECTION_FUNCTIONS)}; exceptions ReflectionRequired, ApiError"
        )
        lines.append(f"- jobs: {', '.join(JOBS_FUNCTIONS)}: work longer than one call")
        functions["show"] = _render_show()
        lines.append(f"- show(image, ...): look at raster.preview results (at most {MAX_IMAGES} a call)")
        index = _template("index.md.tmpl").substitute(lines="\n".join(lines))
        return cls(modules, functions, index.strip())


def _index_line(namespace: str) -> str:
    """``- raster: info, stats, reproject*, ...``: what exists, not how to call it.

    The index is read at the start of every task, so it must not grow with each operation's
    parameters (DD-MCP-058): an agent reads the stub of each function it calls anyway, and that stub
    has the signature, the result and the errors. A star marks a function that may ask for a
    justification.
    """
    names = (op.name + ("*" if op.reflection else "") for op in CATALOG if op.namespace == namespace)
    return f"- {namespace}: {', '.join(names)}"


def write_stubs(directory: Path, stubs: StubSet | None = None) -> list[Path]:
    """Write ``<module>.py`` files and ``INDEX.md``; returns the paths written."""
    stubs = stubs or StubSet.render()
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, source in {**{f"{m}.py": s for m, s in stubs.modules.items()}, "INDEX.md": stubs.index}.items():
        path = directory / name
        path.write_text(source + "\n", encoding="utf-8")
        written.append(path)
    return written


class _Renderer:
    """Turns annotations into stub source, collecting the aliases and TypedDicts they need."""

    def __init__(self, namespace_ops: list[Operation], compact: bool = False):
        self.compact = compact
        self.aliases: dict[str, str] = {}
        self.typed_dicts: dict[str, str] = {}
        self._alias_names = self._find_aliases(namespace_ops)

    @staticmethod
    def _find_aliases(ops: list[Operation]) -> dict[Any, str]:
        names: dict[Any, str] = {}
        for op in ops:
            for name, value in vars(inspect.getmodule(op.func)).items():
                if get_origin(value) is Literal and name[:1].isupper():
                    names.setdefault(value, name)
        return names

    def annotation(self, tp: Any) -> str:
        origin, args = get_origin(tp), get_args(tp)
        if origin is typing.Annotated:
            return self.annotation(args[0])
        if tp is type(None) or tp is None:
            return "None"
        if tp is Any:
            return "Any"
        if origin is Literal:
            text = f"Literal[{', '.join(repr(a) for a in args)}]"
            alias = self._alias_names.get(tp)
            if alias is None:
                return text
            self.aliases[alias] = f"{alias} = {text}"
            return alias
        if origin in (typing.Union, types.UnionType):
            return " | ".join(self.annotation(a) for a in args)
        if origin is not None:
            inner = ", ".join(self.annotation(a) for a in args)
            return f"{origin.__name__}[{inner}]"
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return self.typed_dict(tp)
        if isinstance(tp, type):
            return tp.__name__
        return repr(tp)

    def typed_dict(self, model: type[BaseModel]) -> str:
        name = model.__name__
        if name in self.typed_dicts:
            return name
        self.typed_dicts[name] = ""  # placeholder: reserves the name against recursion
        fields = []
        for field_name, info in model.model_fields.items():
            line = f"    {field_name}: {self.annotation(info.annotation)}"
            description = info.description
            if self.compact:
                description = _convention(description or "")
            if description:
                line += f"  # {description}"
            fields.append(line)
        doc = inspect.cleandoc(model.__doc__) if model.__doc__ and not self.compact else ""
        head = f'class {name}(TypedDict):\n    """{doc}"""\n\n' if doc else f"class {name}(TypedDict):\n"
        self.typed_dicts.pop(name)
        self.typed_dicts[name] = head + ("\n".join(fields) or "    pass")
        return name


def _render_module(title: str, ops: list[Operation]) -> str:
    renderer = _Renderer(ops)
    functions = [_render_function(op, renderer) for op in ops]
    return (
        _template("module.py.tmpl")
        .substitute(
            namespace=title,
            summary=ops[0].summary
            if len(ops) == 1
            else "; ".join(f"{op.name}: {op.summary.rstrip('.')}" for op in ops) + ".",
            aliases="\n".join(renderer.aliases.values()) + "\n" if renderer.aliases else "",
            results="\n\n\n".join(renderer.typed_dicts.values()) + "\n\n" if renderer.typed_dicts else "",
            functions="\n\n".join(functions),
        )
        .rstrip()
        + "\n"
    )


def _render_function(op: Operation, renderer: _Renderer) -> str:
    params = []
    described = []
    for name, param in op.signature.parameters.items():
        stars = "**" if param.kind is inspect.Parameter.VAR_KEYWORD else ""
        text = f"{stars}{name}: {renderer.annotation(op.hints[name])}"
        if param.default is not inspect.Parameter.empty:
            text += f" = {param.default!r}"
        params.append(text)
        description = op.parameter_description(name)
        if description:
            described.append(f"{name}: {description}")
    parameters = ", ".join(params)
    if renderer.compact:
        # One parameter a line, its description as a comment: the name is written once.
        parameters = "\n" + "".join(
            f"    {text},  # {op.parameter_description(name)}\n".replace(",  # \n", ",\n")
            for name, text in zip(op.signature.parameters, params, strict=True)
        )
        doc = "\n".join([op.summary, *_errors(op), *_reflection_line(op)])
    else:
        doc = op.doc
        if described:
            doc += "\n\nArgs:\n" + "\n".join(textwrap.indent(d, "    ") for d in described)
        if op.reflection:
            doc += "\n\nReflection (may raise reflection.ReflectionRequired):\n" + "\n".join(
                f"    {spec.domain}: {spec.when}" for spec in op.reflection
            )
    return _template("function.py.tmpl").substitute(
        name=op.name,
        parameters=parameters,
        returns=renderer.annotation(op.result),
        doc=textwrap.indent(doc, "    ").lstrip(),
    )


def _render_function_stub(op: Operation) -> str:
    """One function alone: its aliases, the result shapes it returns (fields, short notes), the ``def``.

    What ``read_stubs("raster.reproject")`` shows: everything needed to call the function and use its
    result, and nothing shared with the module stub or the server's instructions. The module stub
    keeps the long notes (grid rules, streaming, precision) and the result types' descriptions.
    """
    renderer = _Renderer([op], compact=True)
    function = _render_function(op, renderer)
    results = "\n".join(renderer.typed_dicts.values())
    aliases = "\n".join(renderer.aliases.values())
    body = "\n".join(part for part in (aliases, results, function) if part)
    names = [n for n in ("Any", "Literal", "TypedDict") if n in body]
    head = f"from typing import {', '.join(names)}\n" if names else ""
    return f"{head}{body}"


def _errors(op: Operation) -> list[str]:
    """The ``Errors ...:`` paragraph of the operation's docstring (what raises), on one line."""
    found = [p for p in op.doc.split("\n\n") if p.startswith("Errors")]
    return [" ".join(found[0].split())] if found else []


def _reflection_line(op: Operation) -> list[str]:
    if not op.reflection:
        return []
    asks = "; ".join(f"{spec.domain}: {spec.when}" for spec in op.reflection)
    return [f"Reflection (may raise reflection.ReflectionRequired): {asks}"]


def _convention(description: str) -> str:
    """What a per-function stub says about a result field: only a convention its name and type cannot.

    That is a quoted value (``percentiles  # ... keyed like 'p50'``) or a short aside in parentheses
    (``res  # Pixel size (x, y) in CRS units``, ``nodata  # ... (NaN possible)``), in the first clause
    of the description (:func:`_brief`). ``width: int`` or ``crs: CrsRef | None`` need no words.
    """
    text = _brief(description)
    return text if re.search(r"'|\([^()]{1,24}\)", text) else ""


def _brief(description: str) -> str:
    """A result field's description cut to its first clause.

    ``"Nodata value of each band (NaN possible), null when unset."`` becomes ``"Nodata value of each
    band (NaN possible)"``: the type already says ``| None``. The text after the first ``,`` (outside
    parentheses), ``;``, ``:`` or sentence end goes, and so do asides in parentheses of 25 characters
    or more; the module stub keeps the whole description.
    """
    text = re.split(r"; |: |(?<!e\.g)(?<!i\.e)\. ", description, maxsplit=1)[0]
    depth = 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            text = text[:i]
            break
    return re.sub(r" \([^()]{25,}\)", "", text).strip().rstrip(".")


def _extract_function(source: str, namespace: str, name: str) -> str:
    """One function of a hand-written stub module, with the classes its annotations name (transitively).

    The reflection module is a template, not catalog operations; its per-function stubs are cut out
    of the rendered module so both always say the same (classes keep their field comments, which
    state the word limits; their docstrings go).
    """
    tree = ast.parse(source)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    needed: list[str] = []

    def visit(node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in classes and sub.id not in needed:
                needed.append(sub.id)
                visit(classes[sub.id])

    for annotation in [*(a.annotation for a in function.args.args), function.returns]:
        if annotation is not None:
            visit(annotation)
    lines = source.splitlines()

    def text_of(node: ast.stmt, skip: ast.stmt | None = None) -> str:
        """Whole lines (trailing comments included), without ``skip``'s lines (a docstring)."""
        span = range(node.lineno - 1, node.end_lineno or node.lineno)
        gone = range(skip.lineno - 1, skip.end_lineno or skip.lineno) if skip is not None else range(0)
        return "\n".join(lines[i] for i in span if i not in gone and lines[i].strip())

    parts = []
    for cls_name in sorted(needed, key=lambda n: classes[n].lineno):
        node = classes[cls_name]
        docstring = node.body[0] if ast.get_docstring(node) is not None else None
        parts.append(text_of(node, docstring))
    parts.append(text_of(function))
    body = "\n".join(parts)
    # Type variables the kept lines use (``P = ParamSpec("P")``) come first, as in the module.
    variables = [
        text_of(node)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and re.search(rf"\b{t.id}\b", body) for t in node.targets)
    ]
    body = "\n".join([*variables, body])
    typing_names = ("Any", "Callable", "Generic", "Literal", "ParamSpec", "TypedDict", "TypeVar")
    names = [n for n in typing_names if re.search(rf"\b{n}\b", body)]
    head = f"from typing import {', '.join(names)}\n" if names else ""
    return f"{head}{body}\n"


def _render_show() -> str:
    """The stub of the ``show`` builtin, from the function the sandbox binds (signature and docstring)."""
    show = ShownImages().function()
    params = ", ".join(
        f"{'*' if p.kind is inspect.Parameter.VAR_POSITIONAL else ''}{p.name}: {p.annotation}"
        for p in inspect.signature(show).parameters.values()
    )
    doc = textwrap.indent(inspect.cleandoc(show.__doc__ or ""), "    ").lstrip()
    return f'from typing import Any\n\n\ndef show({params}) -> None:\n    """{doc}\n    """\n'


EXAMPLE_RESAMPLING = {"method": "bilinear", "data": "continuous", "purpose": "warping"}


def _render_jobs(settings: Settings) -> str:
    return (
        _template("jobs.py.tmpl")
        .substitute(
            exec_timeout=f"{settings.exec_timeout:g}",
            job_timeout=f"{settings.job_timeout:g}",
            max_jobs=settings.max_jobs,
            max_session_jobs=settings.max_session_jobs,
            task_ttl=f"{settings.task_ttl:g}",
        )
        .rstrip()
        + "\n"
    )


def _render_reflection() -> str:
    prompts = PromptLibrary.default()
    example = prompts.get("justify_resampling_method")
    return (
        _template("reflection.py.tmpl")
        .substitute(
            domains=", ".join(sorted(DOMAINS)),
            max_chars=MAX_JUSTIFICATION_CHARS,
            example_prompt=example.name,
            example_args=", ".join(f"{a}={EXAMPLE_RESAMPLING[a]!r}" for a in example.arguments),
            intent_words=MIN_WORDS["intent"],
            rationale_words=MIN_WORDS["choice.rationale"],
            tradeoffs_words=MIN_WORDS["choice.tradeoffs"],
            why_not_words=MIN_WORDS["why_not"],
        )
        .rstrip()
        + "\n"
    )
