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
  a justification.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from llmc_mcp.errors import InvalidArgument
from llmc_mcp.outputs import LocalOutputs, OutputGuard, OutputLedger
from llmc_mcp.reflection.specs import Decision, ReflectionSpec
from llmc_mcp.workspace import Workspace

Facts = dict[str, str]
"""What an operation read about its data that scopes the gate's decisions: ``{"data": "categorical"}``."""


@dataclass(frozen=True)
class OperationContext:
    """What trusted operation code needs besides its arguments."""

    workspace: Workspace
    num_threads: int = 2
    outputs: OutputGuard | None = None
    """Permission to write an output (quotas, journal, ledger: :mod:`llmc_mcp.outputs`). A worker's asks
    the server; left out, it is a ledger of this process (tests, tools run in-process)."""

    def __post_init__(self) -> None:
        if self.outputs is None:
            object.__setattr__(self, "outputs", LocalOutputs(OutputLedger(self.workspace)))


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

    @property
    def qualname(self) -> str:
        """``raster.reproject``: the name agents write in code."""
        return f"{self.namespace}.{self.name}"

    @property
    def tool_name(self) -> str:
        """``raster_reproject``: the classic-mode MCP tool name."""
        return f"{self.namespace}_{self.name}"

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
                fix=f"See the signature of {self.qualname} (read_stubs('{self.namespace}')).",
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
                ctx.workspace.input_path(args[name], argument=name)
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
        return self.func(ctx, **args)


def operation(
    namespace: str,
    *,
    read_only: bool,
    reflection: tuple[ReflectionSpec, ...] = (),
    inputs: tuple[str, ...] = (),
    outputs: tuple[str, ...] = (),
    preflight: Callable[[OperationContext, Mapping[str, Any]], Facts | None] | None = None,
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
        )

    return wrap


def _describe_error(err: Mapping[str, Any]) -> str:
    where = ".".join(str(part) for part in err.get("loc", ())) or "arguments"
    if err.get("type") == "extra_forbidden":
        return f"{where}: unknown option (it is not a parameter of this operation)"
    if err.get("type") == "missing":
        return f"{where}: required"
    return f"{where}: {err.get('msg', 'invalid')}"
