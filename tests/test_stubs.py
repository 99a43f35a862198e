"""The stubs agents read are the API the sandbox runs: same functions, same signatures."""

from __future__ import annotations

import inspect
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from llmc_mcp.cli.main import main
from llmc_mcp.operations import CATALOG, NAMESPACES, OperationContext, namespace_operations
from llmc_mcp.reflection.gate import Hint, PersistResult
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.sandbox.bindings import build_modules
from llmc_mcp.stubs.render import REFLECTION_FUNCTIONS, StubSet


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
    return build_modules(ctx, _NoHost(), PromptLibrary.default())


def _hints(func: Any, namespace: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(func, globalns=namespace, include_extras=False)
    hints.pop("return", None)
    return hints


def test_every_namespace_and_reflection_has_a_stub_module(stubs: StubSet) -> None:
    assert sorted(stubs.modules) == sorted([*NAMESPACES, "reflection"])


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
        name: typing.get_args(tp)[0] if typing.get_origin(tp) is typing.Annotated else tp
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


@pytest.mark.parametrize("op", [op for op in CATALOG if op.reflection], ids=lambda op: op.qualname)
def test_gated_operations_name_their_domains_in_the_stub(stubs: StubSet, op: Any) -> None:
    source = stubs.get(op.qualname)
    assert source is not None
    for spec in op.reflection:
        assert f"{spec.domain}: {spec.when}" in source


def test_stubs_command_writes_importable_files(tmp_path: Path) -> None:
    assert main(["stubs", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["INDEX.md", "crs.py", "files.py", "raster.py", "reflection.py"]
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
