"""The ``llmc-mcp`` command as a user meets it: the installed console script, run as a subprocess.

What a newcomer checks first: that a mistyped workspace is an error (not a new empty folder) and that
every help text fits on one screen.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

LLMC = Path(sys.executable).parent / "llmc-mcp"
COMMANDS = ("serve", "demo", "stubs", "justifications")
SCREEN_LINES = 40


def run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script with stdin closed (a stdio server then ends at once on EOF)."""
    return subprocess.run(
        [str(LLMC), *map(str, args)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=120,
    )


def assert_usage_error(out: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit status 2, nothing on stdout, one line on stderr holding every fragment, no traceback."""
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("command", ["serve", "justifications"])
def test_a_missing_workspace_is_an_error_that_names_it_and_creates_nothing(
    command: str, tmp_path: Path
) -> None:
    """Guards against a typo in --workspace silently creating an empty workspace (and .llmc/ in it)."""
    missing = tmp_path / "no" / "such" / "dir"
    out = run(command, "--workspace", missing)
    assert_usage_error(out, str(missing), "does not exist", "--workspace")
    assert not (tmp_path / "no").exists()


def test_serve_names_the_flag_that_creates_a_missing_workspace(tmp_path: Path) -> None:
    """Guards against an error that leaves the user guessing how to get a new workspace on purpose."""
    out = run("serve", "--workspace", tmp_path / "new")
    assert_usage_error(out, "--create-workspace")


def test_a_workspace_from_the_environment_is_checked_too(tmp_path: Path) -> None:
    """Guards against LLMC_MCP_WORKSPACE bypassing the check that --workspace gets."""
    missing = tmp_path / "typo"
    out = run("serve", env={**os.environ, "LLMC_MCP_WORKSPACE": str(missing)})
    assert_usage_error(out, str(missing), "LLMC_MCP_WORKSPACE")
    assert not missing.exists()


def test_a_file_is_not_a_workspace(tmp_path: Path) -> None:
    """Guards against a server confined to a regular file (every call would fail later, obscurely)."""
    file = tmp_path / "raster.tif"
    file.write_bytes(b"")
    assert_usage_error(run("serve", "--workspace", file), str(file), "not a directory")


def test_create_workspace_makes_the_folder_and_serves(tmp_path: Path) -> None:
    """Guards against --create-workspace being refused too, or creating the folder but not serving."""
    wanted = tmp_path / "fresh" / "ws"
    out = run("serve", "--workspace", wanted, "--create-workspace")
    assert out.returncode == 0, out.stderr
    assert wanted.is_dir()
    assert out.stdout == "", "a stdio server must not print outside the protocol"


def test_an_existing_workspace_serves_and_ends_cleanly_on_eof(workspace_dir: Path) -> None:
    """Guards against the workspace check refusing a good workspace."""
    out = run("serve", "--workspace", workspace_dir)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


def test_invalid_settings_are_a_one_line_usage_error(tmp_path: Path) -> None:
    """Guards against a pydantic traceback for a bad flag value."""
    assert_usage_error(run("serve", "--workspace", tmp_path, "--exec-timeout", "-1"), "exec_timeout")


def test_justifications_of_an_empty_workspace_say_so(tmp_path: Path) -> None:
    """Guards against the workspace check breaking the ordinary report."""
    out = run("justifications", "--workspace", tmp_path)
    assert out.returncode == 0, out.stderr
    assert "no justifications" in out.stdout


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_each_help_fits_on_one_screen(command: str) -> None:
    """Guards against help texts growing past what a terminal shows without scrolling (80 x 40)."""
    out = run(*([command] if command else []), "--help", env={**os.environ, "COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert 3 <= len(lines) <= SCREEN_LINES, f"{len(lines)} lines:\n{out.stdout}"
    if not command:
        for name in COMMANDS:
            assert name in out.stdout


def test_python_dash_m_ignores_modules_in_the_working_directory(tmp_path: Path) -> None:
    """Guards against ``python -m llmc_mcp`` importing a ``numpy.py`` (or ``pydantic.py``...) that sits in
    the folder it is run from: ``-m`` puts that folder first on ``sys.path``. ``stubs`` imports every
    dependency, unlike ``--version``."""
    folder = tmp_path / "data"
    folder.mkdir()
    marker = tmp_path / "planted-ran.txt"
    for name in ("numpy", "rasterio", "pyproj", "pydantic", "mcp", "RestrictedPython"):
        (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n")
    out = subprocess.run(
        [sys.executable, "-m", "llmc_mcp", "stubs", "--out", str(tmp_path / "stubs")],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert not marker.exists(), f"a planted module ran: {marker.read_text()}"
    assert (tmp_path / "stubs" / "raster.py").is_file()


def test_the_demos_server_keeps_its_state_where_the_user_said(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Guards against the demo's server writing its keys into ``~/.local/state`` although the user set
    ``LLMC_MCP_STATE_DIR``: the MCP client passes the server it starts only HOME, PATH and a few more."""
    from llmc_mcp.cli.demo import server_parameters
    from llmc_mcp.state import STATE_DIR_ENV

    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    env = server_parameters("code", tmp_path).env or {}
    assert env[STATE_DIR_ENV] == str(tmp_path / "state")
    assert env["XDG_STATE_HOME"] == str(tmp_path / "xdg")
    assert env["LLMC_MCP_KERNEL_CACHE"] == "off"  # the demo routes no flow
