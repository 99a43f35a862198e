"""The package builds as a wheel that installs into a fresh virtual environment with plain pip."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from llmc_mcp import __version__

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a clean copy of the checkout (no stale build/ directory can leak in)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", "build", "dist", "*.egg-info", "node_modules", ".git", "__pycache__", ".pytest_cache"
        ),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(base / "dist"), str(source)],
        check=True,
        capture_output=True,
    )
    return next((base / "dist").glob("llmc_mcp-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed by plain pip; returns its bin dir."""
    base = tmp_path_factory.mktemp("venv")
    venv.create(base / "venv", with_pip=True)
    bindir = base / "venv" / "bin"
    subprocess.run([bindir / "pip", "install", "-q", str(wheel)], check=True, capture_output=True)
    return bindir


def test_the_wheel_holds_every_module_template_prompt_and_the_sample(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {p.relative_to(ROOT).as_posix() for p in (ROOT / "llmc_mcp").rglob("*.py")}
    expected |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "llmc_mcp").rglob("*.tmpl")}
    expected |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "llmc_mcp").rglob("*.md")}
    expected.add("llmc_mcp/cli/sample/RGB.byte.tif")
    assert expected - names == set()


def test_the_installed_command_reports_its_version(installed: Path) -> None:
    out = subprocess.run([installed / "llmc-mcp", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"llmc-mcp {__version__}"


def test_the_installed_help_names_every_command(installed: Path) -> None:
    out = subprocess.run([installed / "llmc-mcp", "--help"], capture_output=True, text=True, check=True)
    for command in ("serve", "demo", "stubs", "justifications"):
        assert command in out.stdout


def test_the_installed_demo_runs_from_the_wheel_alone(installed: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [installed / "llmc-mcp", "demo", "--plain"], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "persist + retry" in out.stdout and '"epsg": 4326' in out.stdout
