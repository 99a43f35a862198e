"""The package builds as a wheel without warnings, the README's first command works, as written, in a
fresh clone (installing the package, built as a wheel, into a fresh virtual environment with plain pip),
and the installed command works with the clone's source gone."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from llmc_mcp import __version__

ROOT = Path(__file__).resolve().parents[1]
NOT_IN_A_CLONE = (
    ".git", ".venv", "build", "dist", "*.egg-info", "node_modules", "__pycache__", ".pytest_cache",
    ".ruff_cache", ".hypothesis", ".clients",
)  # fmt: skip
"""What a checkout accumulates and a clone does not have."""

# One wheel and one installed venv for the whole module: in a parallel run (scripts/test, -n with
# --dist loadgroup) its tests share one process instead of building them once per process.
pytestmark = pytest.mark.xdist_group("packaging")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a clean copy of the checkout (no stale build/ directory can leak in)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(base / "dist"), str(source)],
        capture_output=True,
        text=True,
    )
    (base / "build.log").write_text(built.stdout + built.stderr)
    assert built.returncode == 0, built.stderr[-3000:]
    return next((base / "dist").glob("llmc_mcp-*.whl"))


def test_the_build_warns_about_nothing(wheel: Path) -> None:
    """Guards against setuptools warnings in a user's install log (deprecated licence table, data
    folders missing from the package list): harmless today, alarming to read, errors in a later release."""
    log = (wheel.parent.parent / "build.log").read_text()
    warnings = [
        line.strip()
        for line in log.splitlines()
        if re.search(r"Warning\b|deprecat", line, re.I)
        and not MACHINE_PIP_NOISE.search(line.strip())
        and "byte-compiling is disabled" not in line  # pip's own choice for wheels, not a problem
    ]
    assert warnings == []


@dataclass(frozen=True)
class ReadmeRun:
    command: str
    clone: Path
    result: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> ReadmeRun:
    """The README's first command, run once for the module with ``bash`` in a fresh clone: it installs
    the package non-editable, with every dependency, into the clone's ``.venv`` and runs the demo."""
    command = readme_first_command()
    assert "llmc-mcp demo" in command and "pip install" in command, command
    base = tmp_path_factory.mktemp("readme")
    clone = fresh_clone(base / "llmc-mcp")
    home = base / "home"
    home.mkdir()
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=clone,
        env=newcomer_env(home),
        capture_output=True,
        text=True,
        timeout=900,
    )
    return ReadmeRun(command, clone, result)


@pytest.fixture(scope="module")
def installed(readme_run: ReadmeRun) -> Path:
    """The README's install with the clone's source removed (only its ``.venv`` left): what runs from
    here runs from the installed wheel alone. Returns the venv's bin dir. (One install of every
    dependency serves the README's test and these: each took four minutes on a loaded CI host.)"""
    assert readme_run.result.returncode == 0, readme_run.result.stderr[-3000:]
    for entry in readme_run.clone.iterdir():
        if entry.name == ".venv":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return readme_run.clone / ".venv" / "bin"


def test_the_wheel_holds_every_module_template_prompt_and_the_sample(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {p.relative_to(ROOT).as_posix() for p in (ROOT / "llmc_mcp").rglob("*.py")}
    expected |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "llmc_mcp").rglob("*.tmpl")}
    expected |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "llmc_mcp").rglob("*.md")}
    expected |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "llmc_mcp").rglob("*.yaml")}
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


def readme_first_command() -> str:
    """The first command of the README's "Two commands" block, exactly as a newcomer would paste it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block, "the README's 'Two commands' section has no bash block"
    commands = [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]
    return commands[0]


def fresh_clone(destination: Path) -> Path:
    """What a clone of the checkout holds, without going through a commit.

    In a git checkout: the files git tracks, plus new files not ignored (work not yet committed; none in
    CI), copied as they are in the working tree. ``git clone`` of HEAD would miss uncommitted changes,
    and a plain copy of the directory would carry ``.venv``, ``*.egg-info`` and ``build/``, which hide
    packaging mistakes. Outside git (a source archive), the tree without those folders.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
    )
    if listed.returncode != 0 or not (ROOT / ".git").exists():
        shutil.copytree(ROOT, destination, symlinks=True, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE))
        return destination
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file() or source.is_symlink():  # a tracked file deleted in the work tree is skipped
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    return destination


MACHINE_PIP_NOISE = re.compile(r"^WARNING: Location '[^']+' is ignored: it is neither a file nor a directory")
"""pip's complaint about an index folder named in this machine's pip.conf that does not exist: about the
machine, not the package (every other warning of the install or the demo fails the test)."""


def newcomer_env(home: Path) -> dict[str, str]:
    """The environment of a shell outside any virtualenv: this suite's venv off PATH, no PYTHONPATH."""
    ours = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != ours)
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "PATH": path, "HOME": str(home), "PIP_NO_INPUT": "1"}


def test_the_readmes_first_command_runs_the_demo_in_a_fresh_clone(readme_run: ReadmeRun) -> None:
    """Guards against a README whose first command fails on a newcomer's machine.

    Once it ended in ``ModuleNotFoundError: llmc_mcp.stubs_templates``: the demo started
    ``python -m llmc_mcp`` in the clone, whose source tree shadowed the installed wheel. The command is
    read from the README (so editing it re-runs this test on the new text) and run with ``bash`` in a
    copy of the checkout, installing non-editable into a new ``.venv`` with whatever ``python3`` is on
    PATH. Takes a few minutes: pip installs every dependency (from its cache or index).
    """
    command, out = readme_run.command, readme_run.result
    assert out.returncode == 0, f"$ {command}\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    assert "persist + retry" in out.stdout and '"epsg": 4326' in out.stdout, out.stdout[-2000:]
    assert "Traceback" not in out.stderr, out.stderr[-4000:]
    alarming = [
        line
        for line in out.stderr.splitlines()
        if re.search(r"error|warning|deprecat", line, re.I) and not MACHINE_PIP_NOISE.search(line)
    ]
    assert alarming == [], "the install or the demo printed warnings:\n" + "\n".join(alarming)
    installed = readme_run.clone / ".venv" / "lib"
    assert list(installed.glob("python3*/site-packages/llmc_mcp/__init__.py")), "the package is not installed"
    assert not list(installed.glob("python3*/site-packages/__editable__*")), "the install was editable"
