"""The package's layers hold (DD-MCP-081): each layer imports only from the ones below it, the
operation namespaces are independent, no private name crosses a package.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``) and ``scripts/test`` runs
``lint-imports`` on every run; these tests run the same contracts and add the rules import-linter has
no contract type for.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from llmc_mcp.config import CATALOG_NAMESPACES
from llmc_mcp.operations import NAMESPACES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llmc_mcp"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_import_contracts_hold() -> None:
    """Guards against an import that runs up a layer, or between two namespaces, landing unnoticed."""
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_an_upward_import_fails_with_the_name_of_the_rule(tmp_path: Path) -> None:
    """Guards against contracts that cannot fail: a foundation module made to import the server is
    reported as a broken layers contract, naming the rule and the import."""
    shutil.copytree(PACKAGE, tmp_path / "llmc_mcp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = tmp_path / "llmc_mcp" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom llmc_mcp.server import app  # noqa: E402\n")
    run = _lint_imports(tmp_path)
    assert run.returncode != 0
    assert "Layers: faces > execution > operations > compute > records > foundation BROKEN" in run.stdout
    assert "llmc_mcp.errors -> llmc_mcp.server.app" in run.stdout


def test_one_namespace_importing_another_fails_with_the_name_of_the_rule(tmp_path: Path) -> None:
    """Guards against namespaces growing into each other: terrain taking a raster helper directly
    instead of through the compute layer is reported as a broken namespace contract."""
    shutil.copytree(PACKAGE, tmp_path / "llmc_mcp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    slope = tmp_path / "llmc_mcp" / "operations" / "terrain" / "slope.py"
    slope.write_text(slope.read_text() + "\nfrom llmc_mcp.operations.raster import grid  # noqa: E402\n")
    run = _lint_imports(tmp_path)
    assert run.returncode != 0
    assert "Operations: namespaces above the catalog, independent of each other BROKEN" in run.stdout


def _package_of(module: str) -> str:
    """A package is its own package; a module's is the one holding it."""
    return module if (ROOT / Path(*module.split("."))).is_dir() else module.rpartition(".")[0]


def _private_imports_across_packages() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        package = _package_of(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
                continue
            target = node.module
            if not target.startswith("llmc_mcp") or _package_of(target) == package:
                continue
            private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            private_module = any(part.startswith("_") and part != "__init__" for part in target.split("."))
            if private or private_module:
                found.append(f"{module}:{node.lineno} imports {private or target} from {target}")
    return found


def test_no_private_name_is_imported_from_another_package() -> None:
    """Guards against one package reaching into another's internals (``operations.files._walk`` once
    served lineage): a name two packages need is public, in the lower one, with a docstring."""
    assert _private_imports_across_packages() == [], "rule: no private names across packages"


def test_the_settings_name_the_catalogs_namespaces() -> None:
    """Guards against ``--tools`` accepting or refusing a namespace the catalog does (not) have: the
    settings sit below the catalog, so they name its namespaces instead of importing it."""
    assert CATALOG_NAMESPACES == NAMESPACES
