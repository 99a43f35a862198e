"""The stubs agents read are the API the sandbox runs: same functions, same signatures."""

from __future__ import annotations

import inspect
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from llmc_mcp.cli.main import main
from llmc_mcp.operations import CATALOG, NAMESPACES, OperationContext, namespace_operations
from llmc_mcp.reflection.gate import Hint, PersistResult
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.sandbox.jobs_module import CallClock, sandbox_modules
from llmc_mcp.stubs.render import JOBS_FUNCTIONS, REFLECTION_FUNCTIONS, StubSet
from llmc_mcp.tokens import count_tokens


class _NoHost:
    """Signatures need no server; any request would be a test bug."""

    def request(self, method: str, params: Any) -> Any:
        raise AssertionError("signature checks must not reach the server")


@pytest.fixture(scope="module")
def stubs() -> StubSet:
    return StubSet.render()


@pytest.fixture(scope="module")
def stub_modules(stubs: StubSet) -> dict[str, types.ModuleType]:
    modules = {}
    for name, source in stubs.modules.items():
        module = types.ModuleType(f"stub_{name}")
        exec(compile(source, f"{name}.py", "exec"), module.__dict__)
        modules[name] = module
    return modules


@pytest.fixture(scope="module")
def bindings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from llmc_mcp.workspace import Workspace

    ctx = OperationContext(Workspace(tmp_path_factory.mktemp("ws")))
    return sandbox_modules(ctx, _NoHost(), PromptLibrary.default(), CallClock(30.0))


def _hints(func: Any, namespace: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(func, globalns=namespace, include_extras=False)
    hints.pop("return", None)
    return {name: _shape(tp) for name, tp in hints.items()}


def _shape(tp: Any) -> Any:
    """A type with each structured parameter (a pydantic model at runtime, its TypedDict in the stub)
    replaced by its name and field names, so the two sides compare equal when they describe one shape."""
    if isinstance(tp, type) and (issubclass(tp, BaseModel) or typing.is_typeddict(tp)):
        fields = tp.model_fields if issubclass(tp, BaseModel) else tp.__annotations__
        return (tp.__name__, tuple(sorted(fields)))
    args = typing.get_args(tp)
    if args and typing.get_origin(tp) is list:
        return ("list", tuple(_shape(a) for a in args))
    if typing.get_origin(tp) is typing.Annotated:  # validators on a union's member (a resolution)
        return _shape(args[0])
    if args and typing.get_origin(tp) in (typing.Union, types.UnionType):
        return ("union", tuple(_shape(a) for a in args))
    return tp


def test_every_namespace_and_reflection_has_a_stub_module(stubs: StubSet) -> None:
    assert sorted(stubs.modules) == sorted([*NAMESPACES, "reflection", "jobs"])


@pytest.mark.parametrize("op", CATALOG, ids=lambda op: op.qualname)
def test_every_catalog_operation_has_a_stub(stub_modules: dict[str, types.ModuleType], op: Any) -> None:
    assert callable(getattr(stub_modules[op.namespace], op.name))


@pytest.mark.parametrize("op", CATALOG, ids=lambda op: op.qualname)
def test_stub_signature_equals_the_runtime_binding(
    stub_modules: dict[str, types.ModuleType], bindings: dict[str, Any], op: Any
) -> None:
    stub = getattr(stub_modules[op.namespace], op.name)
    runtime = getattr(bindings[op.namespace], op.name)
    stub_sig, runtime_sig = inspect.signature(stub), inspect.signature(runtime)
    assert [(p.name, p.kind, p.default) for p in stub_sig.parameters.values()] == [
        (p.name, p.kind, p.default) for p in runtime_sig.parameters.values()
    ]
    runtime_hints = {
        name: _shape(typing.get_args(tp)[0] if typing.get_origin(tp) is typing.Annotated else tp)
        for name, tp in op.hints.items()
    }
    assert _hints(stub, vars(stub_modules[op.namespace])) == runtime_hints


@pytest.mark.parametrize("op", CATALOG, ids=lambda op: op.qualname)
def test_stub_return_type_lists_every_result_field(
    stub_modules: dict[str, types.ModuleType], op: Any
) -> None:
    stub = getattr(stub_modules[op.namespace], op.name)
    returned = typing.get_type_hints(stub, globalns=vars(stub_modules[op.namespace]))["return"]
    assert returned.__name__ == op.result.__name__
    assert set(returned.__annotations__) == set(op.result.model_fields)


@pytest.mark.parametrize("name", REFLECTION_FUNCTIONS)
def test_reflection_stub_signatures_equal_the_runtime(
    stub_modules: dict[str, types.ModuleType], bindings: dict[str, Any], name: str
) -> None:
    stub = inspect.signature(getattr(stub_modules["reflection"], name))
    runtime = inspect.signature(getattr(bindings["reflection"], name))
    assert [(p.name, p.kind, p.default) for p in stub.parameters.values()] == [
        (p.name, p.kind, p.default) for p in runtime.parameters.values()
    ]


@pytest.mark.parametrize("name", JOBS_FUNCTIONS)
def test_jobs_stub_signatures_equal_the_runtime(
    stubs: StubSet, stub_modules: dict[str, types.ModuleType], bindings: dict[str, Any], name: str
) -> None:
    """Guards against the jobs stub promising a call (a parameter, its kind or default) the sandbox's
    jobs module does not take, in the module stub and in the one-function stub alike."""
    runtime = inspect.signature(getattr(bindings["jobs"], name))
    expected = [(p.name, p.kind, p.default) for p in runtime.parameters.values()]
    for stub in (
        getattr(stub_modules["jobs"], name),
        getattr(_load(stubs.functions[f"jobs.{name}"], name), name),
    ):
        assert [(p.name, p.kind, p.default) for p in inspect.signature(stub).parameters.values()] == expected


@pytest.mark.parametrize("op", [op for op in CATALOG if op.reflection], ids=lambda op: op.qualname)
def test_gated_operations_name_their_domains_in_the_stub(stubs: StubSet, op: Any) -> None:
    source = stubs.get(op.qualname)
    assert source is not None
    for spec in op.reflection:
        assert f"{spec.domain}: {spec.when}" in source


def test_stubs_command_writes_importable_files(tmp_path: Path) -> None:
    """Guards against a namespace of the catalog missing from the stubs a user writes out."""
    assert main(["stubs", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(
        ["INDEX.md", "reflection.py", "jobs.py", *(f"{namespace}.py" for namespace in NAMESPACES)]
    )
    for path in tmp_path.glob("*.py"):
        compile(path.read_text(), path.name, "exec")


@pytest.mark.parametrize("op", CATALOG, ids=lambda op: op.qualname)
def test_one_function_stub_compiles_and_is_smaller_than_its_module(stubs: StubSet, op: Any) -> None:
    source = stubs.get(op.qualname)
    assert source is not None
    compile(source, f"{op.qualname}.py", "exec")
    assert f"def {op.name}(" in source
    assert len(source) < len(stubs.modules[op.namespace]) or len(namespace_operations(op.namespace)) == 1


@pytest.mark.parametrize("model", [Hint, PersistResult], ids=lambda m: m.__name__)
def test_reflection_stub_shapes_list_the_fields_the_server_sends(
    stub_modules: dict[str, types.ModuleType], model: Any
) -> None:
    shape = getattr(stub_modules["reflection"], model.__name__)
    assert set(shape.__annotations__) == set(model.model_fields)


FUNCTION_STUB_BUDGET = 1200
"""o200k tokens a per-function stub may cost (``read_stubs("raster.reproject")``).

The honest token benchmark (``bench/tokens.py``) has every code-mode task read the stub of each
function it calls, so these reads are most of code mode's cost over classic mode. The largest
operation (raster.reproject: 11 parameters, two enums, the 22-field RasterInfo with its nested
shapes, its errors and three reflection domains) fits in about 1,070 tokens with nothing left
out; the budget leaves room for a few more parameters or fields, and a stub over it has grown
prose (module notes, repeated descriptions) that belongs in the module stub. A catalog function's
stub also stays under 40% of its module's (when the module has other functions), so the compact
form cannot quietly turn back into the module's."""


def _load(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(f"stub_{name}")
    exec(compile(source, f"{name}.py", "exec"), module.__dict__)
    return module


def _nested_models(model: Any) -> list[Any]:
    """``model`` and every result model its fields contain, depth first."""
    found = [model]
    for info in model.model_fields.values():
        for arg in [info.annotation, *_deep_args(info.annotation)]:
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in found:
                found.extend(m for m in _nested_models(arg) if m not in found)
    return found


def _deep_args(tp: Any) -> list[Any]:
    args = list(typing.get_args(tp))
    return [a for arg in args for a in (arg, *_deep_args(arg))]


@pytest.mark.parametrize(
    "name", [*(op.qualname for op in CATALOG), *(f"reflection.{f}" for f in REFLECTION_FUNCTIONS)]
)
def test_a_function_stub_is_within_its_token_budget(stubs: StubSet, name: str) -> None:
    source = stubs.functions[name]
    assert count_tokens(source) <= FUNCTION_STUB_BUDGET, (name, count_tokens(source))
    module = name.split(".")[0]
    if module in NAMESPACES and len(namespace_operations(module)) > 1:
        assert count_tokens(source) <= 0.4 * count_tokens(stubs.modules[module]), name


@pytest.mark.parametrize("op", CATALOG, ids=lambda op: op.qualname)
def test_a_function_stub_names_every_parameter_result_field_error_and_domain(
    stubs: StubSet, bindings: dict[str, Any], op: Any
) -> None:
    source = stubs.functions[op.qualname]
    stub = getattr(_load(source, op.qualname), op.name)
    runtime = inspect.signature(getattr(bindings[op.namespace], op.name))
    assert [(p.name, p.kind, p.default) for p in inspect.signature(stub).parameters.values()] == [
        (p.name, p.kind, p.default) for p in runtime.parameters.values()
    ]
    for name in op.signature.parameters:  # each parameter keeps its description (limits, units)
        assert f"# {op.parameter_description(name)}" in source
    namespace = vars(_load(source, op.qualname))
    for model in _nested_models(op.result):
        assert set(namespace[model.__name__].__annotations__) == set(model.model_fields), model.__name__
    errors = [p for p in op.doc.split("\n\n") if p.startswith("Errors")]
    assert errors and " ".join(errors[0].split()) in source
    reflection = [line for line in source.splitlines() if "ReflectionRequired" in line]
    assert len(reflection) == (1 if op.reflection else 0)  # the domains in one line
    for spec in op.reflection:
        assert f"{spec.domain}: {spec.when}" in reflection[0]


@pytest.mark.parametrize("name", REFLECTION_FUNCTIONS)
def test_a_reflection_function_stub_matches_the_runtime_and_its_module(
    stubs: StubSet, stub_modules: dict[str, types.ModuleType], bindings: dict[str, Any], name: str
) -> None:
    loaded = _load(stubs.functions[f"reflection.{name}"], name)
    runtime = inspect.signature(getattr(bindings["reflection"], name))
    assert [
        (p.name, p.kind, p.default) for p in inspect.signature(getattr(loaded, name)).parameters.values()
    ] == [(p.name, p.kind, p.default) for p in runtime.parameters.values()]
    for shape in (v for v in vars(loaded).values() if isinstance(v, type) and hasattr(v, "__total__")):
        assert (
            shape.__annotations__.keys()
            == vars(stub_modules["reflection"])[shape.__name__].__annotations__.keys()
        )
