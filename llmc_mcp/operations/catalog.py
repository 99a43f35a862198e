"""The operation catalog: each operation is defined once, here, and every face derives from it.

An operation is a plain function ``f(ctx, *params) -> ResultModel`` decorated
with :func:`operation`. The decorator records what the faces need and nothing
they could disagree on:

- the public signature (the function's, minus ``ctx``), from which the classic
  tool schema, the stub text and the sandbox binding are all generated;
- a pydantic arguments model built from that signature (``extra="forbid"``,
  so an unknown option is an error, never silently ignored);
- the result model; the reflection specs; which parameters are input and
  output paths, so the invoker can refuse a bad path before the gate asks for
  a justification;
- the classic tool's name, when it is not ``<namespace>_<name>`` (``workflow_start``), or that the
  operation has no classic tool at all (a code-mode convenience the classic tools already cover).

A ``**inputs: str`` parameter (open keyword arguments, as ``workflows.start(name, **inputs)`` takes)
is one argument ``inputs: dict[str, str]`` of the arguments model. Code calls it with keywords; the
classic tool, whose schema must be closed for strict providers, takes it as a list of ``{name,
value}`` pairs (:meth:`Operation.classic_parameters`, :meth:`Operation.from_classic`).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from llmc_mcp.compute.engine import LOCAL, Engine
from llmc_mcp.errors import InvalidArgument, NotFound
from llmc_mcp.gdal.remote_datasets import input_location
from llmc_mcp.outputs import LocalOutputs, OutputGuard, OutputLedger
from llmc_mcp.reflection.specs import Decision, Facts, ReflectionSpec
from llmc_mcp.workspace import Workspace


class WorkflowService(Protocol):
    """How operation code reaches the workflow engine; results are plain JSON data. The ``workflows``
    namespace implements it (in this process, or over the host channel in a worker)."""

    def request(self, call: str, params: Mapping[str, Any]) -> Any: ...


_local_workflows: Callable[[Workspace], WorkflowService] | None = None


def provide_local_workflows(factory: Callable[[Workspace], WorkflowService]) -> None:
    """The ``workflows`` namespace registers how a context left without a workflow service gets one of
    this process: the catalog sits below every namespace and imports none of them."""
    global _local_workflows
    _local_workflows = factory


@dataclass(frozen=True)
class OperationContext:
    """What trusted operation code needs besides its arguments."""

    workspace: Workspace
    num_threads: int = 2
    outputs: OutputGuard | None = None
    """Permission to write an output (quotas, journal, ledger: :mod:`llmc_mcp.outputs`). A worker's asks
    the server; left out, it is a ledger of this process (tests, tools run in-process)."""
    workflows: WorkflowService | None = None
    """The workflow engine (:mod:`llmc_mcp.operations.workflows`): a worker's asks the server, which keeps the
    states and the justification store; left out, an engine of this process."""
    engine: Engine = LOCAL
    """Where pixel work runs (:mod:`llmc_mcp.compute.engine`): this process, window by window."""

    def __post_init__(self) -> None:
        if self.outputs is None:
            object.__setattr__(self, "outputs", LocalOutputs(OutputLedger(self.workspace)))
        if self.workflows is None and _local_workflows is not None:
            object.__setattr__(self, "workflows", _local_workflows(self.workspace))


@dataclass(frozen=True)
class Operation:
    """One catalog entry. Call :meth:`validate`, then the gate, then :meth:`run`."""

    namespace: str
    name: str
    func: Callable[..., BaseModel]
    result: type[BaseModel]
    signature: inspect.Signature
    arguments: type[BaseModel]
    reflection: tuple[ReflectionSpec, ...] = ()
    read_only: bool = True
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    hints: Mapping[str, Any] = field(default_factory=dict)
    preflight: Callable[[OperationContext, Mapping[str, Any]], Facts | None] | None = None
    """Cross-argument checks (conflicts, values the source file cannot take) run before the gate. It
    reads the inputs' headers anyway, so it also returns what the gate must know about the data a
    decision concerns (``{"data": "categorical"}``): decisions are scoped by those facts."""
    classic_name: str | None = None
    """The classic tool's name when it is not ``<namespace>_<name>``."""
    classic: bool = True
    """False: no classic tool (code mode only)."""

    @property
    def qualname(self) -> str:
        """``raster.reproject``: the name agents write in code."""
        return f"{self.namespace}.{self.name}"

    @property
    def tool_name(self) -> str:
        """``raster_reproject``: the classic-mode MCP tool name."""
        return self.classic_name or f"{self.namespace}_{self.name}"

    @property
    def var_keyword(self) -> str | None:
        """The name of the ``**inputs`` parameter, if the operation has one."""
        for name, param in self.signature.parameters.items():
            if param.kind is inspect.Parameter.VAR_KEYWORD:
                return name
        return None

    def classic_parameters(self) -> tuple[inspect.Signature, dict[str, Any]]:
        """The classic tool's signature and annotations: ``**inputs`` becomes a list of pairs."""
        extra = self.var_keyword
        if extra is None:
            return self.signature, dict(self.hints)
        pair = create_model(
            f"{self.namespace.title()}{self.name.title()}Input",
            __config__=ConfigDict(extra="forbid"),
            name=(str, ...),
            value=(self.hints[extra], ...),
        )
        listed = typing.Annotated[
            list[pair],  # type: ignore[valid-type]
            Field(description=f"The {extra} as [{{name, value}}] pairs, one per named input."),
        ]
        parameters = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=listed, default=[]) if n == extra else p
            for n, p in self.signature.parameters.items()
        ]
        return self.signature.replace(parameters=parameters), {**self.hints, extra: listed}

    def from_classic(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """A classic tool call's arguments as code would pass them: the pairs as keyword arguments."""
        extra = self.var_keyword
        if extra is None:
            return dict(kwargs)
        fixed = {k: v for k, v in kwargs.items() if k != extra}
        named: dict[str, Any] = {}
        for pair in kwargs.get(extra) or []:
            if isinstance(pair, BaseModel):
                name, value = pair.name, pair.value  # type: ignore[attr-defined]
            else:
                name, value = pair["name"], pair["value"]
            if name in self.signature.parameters or name in named:
                raise InvalidArgument(
                    f"{self.tool_name}: {extra} names {name!r} twice or as a parameter of the tool.",
                    fix="Give each input once, under its own name.",
                )
            named[name] = value
        return {**fixed, **named}

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.func.__doc__ or "")

    @property
    def summary(self) -> str:
        return self.doc.split("\n\n", 1)[0].replace("\n", " ")

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(spec.domain for spec in self.reflection))

    def parameter_description(self, name: str) -> str:
        info = self.arguments.model_fields[name]
        return info.description or ""

    def validate(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Check raw arguments against the signature; field-level errors name the fix."""
        try:
            model = self.arguments.model_validate(dict(raw))
        except ValidationError as exc:
            problems = [_describe_error(err) for err in exc.errors(include_url=False)]
            raise InvalidArgument(
                f"{self.qualname}: " + "; ".join(problems),
                fix=f"See the signature of {self.qualname} (read_stubs('{self.qualname}')).",
                details={"errors": problems},
            ) from None
        return {name: getattr(model, name) for name in self.arguments.model_fields}

    def decisions(self, args: Mapping[str, Any], facts: Mapping[str, str] | None = None) -> list[Decision]:
        """The consequential choices these (validated) arguments make on data with these ``facts``."""
        found = []
        for spec in self.reflection:
            decision = spec.decide(args, facts or {})
            if decision is not None:
                found.append(decision)
        return found

    def check_paths(self, ctx: OperationContext, args: Mapping[str, Any]) -> None:
        """Refuse bad paths before any gate or GDAL work."""
        for name in self.inputs:
            if args.get(name) is not None:
                input_location(ctx, args[name], name)
        for name in self.outputs:
            if args.get(name) is not None:
                ctx.workspace.output_path(args[name], argument=name)

    def check(self, ctx: OperationContext, args: Mapping[str, Any]) -> Facts:
        """Everything that can be refused before asking for a justification: paths, then preflight.

        Returns the preflight's facts about the data, for the gate (empty when it has none).
        """
        self.check_paths(ctx, args)
        facts = self.preflight(ctx, args) if self.preflight is not None else None
        return facts or {}

    def run(self, ctx: OperationContext, args: Mapping[str, Any]) -> BaseModel:
        extra = self.var_keyword
        if extra is None:
            return self.func(ctx, **args)
        fixed = {k: v for k, v in args.items() if k != extra}
        return self.func(ctx, **fixed, **(args.get(extra) or {}))


def operation(
    namespace: str,
    *,
    read_only: bool,
    reflection: tuple[ReflectionSpec, ...] = (),
    inputs: tuple[str, ...] = (),
    outputs: tuple[str, ...] = (),
    preflight: Callable[[OperationContext, Mapping[str, Any]], Facts | None] | None = None,
    classic_name: str | None = None,
    classic: bool = True,
) -> Callable[[Callable[..., BaseModel]], Operation]:
    """Register a function as a catalog operation; its first parameter must be ``ctx``."""

    def wrap(func: Callable[..., BaseModel]) -> Operation:
        hints = typing.get_type_hints(func, include_extras=True)
        full = inspect.signature(func)
        params = list(full.parameters.values())
        if not params or params[0].name != "ctx":
            raise TypeError(f"{func.__name__}: the first parameter must be 'ctx'")
        public = [p.replace(annotation=hints[p.name]) for p in params[1:]]
        result = hints["return"]
        signature = inspect.Signature(public, return_annotation=result)
        fields: dict[str, Any] = {}
        for p in public:
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                described = Field(default_factory=dict, description=_description(p.annotation))
                fields[p.name] = (dict[str, p.annotation], described)  # type: ignore[name-defined]
                continue
            default = ... if p.default is inspect.Parameter.empty else p.default
            fields[p.name] = (p.annotation, default)
        arguments = create_model(
            f"{namespace.title()}{func.__name__.title().replace('_', '')}Arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        for name in (*inputs, *outputs):
            if name not in signature.parameters:
                raise TypeError(f"{func.__name__}: path parameter {name!r} is not in the signature")
        return Operation(
            namespace=namespace,
            name=func.__name__,
            func=func,
            result=result,
            signature=signature,
            arguments=arguments,
            reflection=reflection,
            read_only=read_only,
            inputs=inputs,
            outputs=outputs,
            hints={p.name: hints[p.name] for p in public},
            preflight=preflight,
            classic_name=classic_name,
            classic=classic,
        )

    return wrap


_published: tuple[Operation, ...] = ()


def publish(operations: tuple[Operation, ...]) -> None:
    """Make the assembled catalog (:data:`llmc_mcp.operations.CATALOG`) known to code below it that looks
    operations up by name at run time: a workflow's steps name the operations they call."""
    global _published
    _published = operations


def find_operation(qualname: str) -> Operation | None:
    """The published operation called ``qualname`` (``raster.reproject``), or None."""
    return next((op for op in _published if op.qualname == qualname), None)


def get_operation(qualname: str) -> Operation:
    """The published operation called ``qualname``; :class:`NotFound` names the known ones."""
    op = find_operation(qualname)
    if op is None:
        raise NotFound(
            f"No operation named {qualname!r}.", fix=f"Known: {', '.join(o.qualname for o in _published)}."
        )
    return op


def _description(annotation: Any) -> str | None:
    """The ``Field(description=...)`` inside an ``Annotated`` type: a ``**`` parameter's field's own."""
    for meta in getattr(annotation, "__metadata__", ()):
        if getattr(meta, "description", None):
            return str(meta.description)
    return None


def _describe_error(err: Mapping[str, Any]) -> str:
    where = ".".join(str(part) for part in err.get("loc", ())) or "arguments"
    if err.get("type") == "extra_forbidden":
        return f"{where}: unknown option (it is not a parameter of this operation)"
    if err.get("type") == "missing":
        return f"{where}: required"
    return f"{where}: {err.get('msg', 'invalid')}"
