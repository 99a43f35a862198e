"""The ways people install an MCP server work as written: `uvx --from .` from a clone, the Docker image,
the MCP registry entry (`server.json`), the citation file, and every host block the README says to paste.

What needs a tool this machine may lack skips with the reason (Docker without a daemon; uv where it
cannot be installed); in CI (CI=true or LLMC_MCP_REQUIRE_CLIENTS=1) a missing uv is a failure.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import venv
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import pytest
import yaml
from mcp import Client, StdioServerParameters

from llmc_mcp import __version__
from llmc_mcp.cli.main import build_parser
from llmc_mcp.state import STATE_DIR_ENV
from tests.mcp_helpers import structured
from tests.test_packaging import NOT_IN_A_CLONE

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "tests" / "schemas"
DATA = ROOT / "tests" / "data"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]["name"]
SCRIPTS = set(PYPROJECT["project"]["scripts"])
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("LLMC_MCP_REQUIRE_CLIENTS", "0") != "0"
INFO = 'info = raster.info("RGB.byte.tif")\n[info["width"], info["height"]]'
"""RGB.byte.tif is 791 x 718 pixels (rasterio's test data): a real read through the installed server."""

# Published SHA-256 of each vendored schema (tests/schemas/README.md gives the source of each).
VENDORED = {
    "server.schema.2025-12-11.json": "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0",
    "cff.schema.1.2.0.json": "0b8d22140da702d766df318dcff3a91af2f39521298dcf36d76315fd99cc169b",
}


def serve_args(argv: list[str]) -> argparse.Namespace:
    """``argv`` as ``llmc-mcp`` itself parses it; a flag it does not know fails the test, not exits."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"llmc-mcp rejects {argv}: exit {exc.code}")
    assert args.command == "serve", argv
    return args


def validator(schema_file: str) -> jsonschema.Draft7Validator:
    schema = json.loads((SCHEMAS / schema_file).read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def problems(schema_file: str, document: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator(schema_file).iter_errors(document)
    ]


async def serves_code_mode(params: StdioServerParameters) -> None:
    """The server ``params`` starts lists the code-mode tools and reads a raster through them."""
    async with Client(params) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == [
            "00_INIT",
            "execute_code",
            "read_stubs",
        ]
        assert structured(await client.call_tool("execute_code", {"code": INFO}))["result"] == [791, 718]


# ---------------------------------------------------------------------------------------------- schemas


@pytest.mark.parametrize("name", sorted(VENDORED))
def test_the_vendored_schemas_are_the_published_bytes(name: str) -> None:
    """Guards against a vendored schema loosened by hand until our file passes: the registry and CFF
    tools validate against the published bytes, not our copy."""
    assert hashlib.sha256((SCHEMAS / name).read_bytes()).hexdigest() == VENDORED[name]
    assert VENDORED[name] in (SCHEMAS / "README.md").read_text()


# ------------------------------------------------------------------------------------------ server.json


def server_json() -> dict[str, Any]:
    return json.loads((ROOT / "server.json").read_text())


def test_server_json_conforms_to_the_registry_schema_it_names() -> None:
    """Guards against an entry the MCP registry refuses at publish time (a description over 100
    characters, a package without transport, a name without its namespace slash)."""
    entry = server_json()
    assert entry["$schema"] == validator("server.schema.2025-12-11.json").schema["$id"]
    assert problems("server.schema.2025-12-11.json", entry) == []


def test_server_json_is_this_package_at_this_version() -> None:
    """Guards against a registry entry that installs another package or an older release than the
    one it describes."""
    entry = server_json()
    (pypi,) = [p for p in entry["packages"] if p["registryType"] == "pypi"]
    assert (pypi["identifier"], pypi["version"], entry["version"]) == (PROJECT, __version__, __version__)
    assert pypi["transport"] == {"type": "stdio"}


def test_server_json_arguments_are_a_serve_command_llmc_mcp_accepts() -> None:
    """Guards against a host that builds its command line from the entry getting a usage error: every
    argument, with its default or first choice filled in, must parse as ``llmc-mcp serve``."""
    (pypi,) = [p for p in server_json()["packages"] if p["registryType"] == "pypi"]
    argv: list[str] = []
    for argument in pypi["packageArguments"]:
        value = (
            argument.get("value") or argument.get("default") or next(iter(argument.get("choices", [])), "x")
        )
        argv += [value] if argument["type"] == "positional" else [argument["name"], value]
    serve_args(argv)
    assert {v["name"] for v in pypi.get("environmentVariables", [])} <= {STATE_DIR_ENV}


def test_the_readme_carries_the_registry_ownership_line() -> None:
    """Guards against a publish the registry refuses: for a PyPI package it looks for
    ``mcp-name: <server name>`` in the package's description (the README) to prove ownership."""
    assert f"mcp-name: {server_json()['name']}" in (ROOT / "README.md").read_text()


# ----------------------------------------------------------------------------------------- CITATION.cff


def test_citation_cff_is_valid_cff_1_2_0_for_this_version() -> None:
    """Guards against a citation file GitHub's "Cite this repository" and Zenodo reject (missing
    message or authors) or one that cites another release."""
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert {"cff-version", "message", "title", "authors"} <= set(citation)
    assert citation["cff-version"] == "1.2.0"
    assert str(citation["version"]) == __version__
    assert citation["license"] == PYPROJECT["project"]["license"]
    assert problems("cff.schema.1.2.0.json", citation) == []


# ------------------------------------------------------------------------------------------- Dockerfile


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        keyword, _, rest = (pending + line).strip().partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    return instructions


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile()
    start = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[start:]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, rest in final_stage():
        if keyword == "ENV":
            env.update(pair.split("=", 1) for pair in shlex.split(rest))
    return env


def one(keyword: str) -> str:
    (value,) = [rest for k, rest in final_stage() if k == keyword]
    return value


def test_the_image_runs_llmc_mcp_serve_with_flags_it_accepts() -> None:
    """Guards against an image whose default command names a script the package does not install or
    a flag ``serve`` does not know (the container would exit with a usage error on first run)."""
    entrypoint, cmd = json.loads(one("ENTRYPOINT")), json.loads(one("CMD"))
    assert entrypoint[0] in SCRIPTS
    serve_args([*entrypoint[1:], *cmd])
    # The HTTP form the Dockerfile documents, with the image's arguments after its name.
    documented = re.search(r"llmc-mcp (serve --transport http[^\n]*)", (ROOT / "Dockerfile").read_text())
    assert documented is not None
    assert serve_args(shlex.split(documented.group(1))).transport == "http"


def test_the_image_runs_as_an_unprivileged_user() -> None:
    """Guards against a container whose agent-facing server runs as root (a sandbox escape would own
    the container and every file in the mounted workspace)."""
    user = one("USER").split(":")[0]
    assert user not in {"root", "0"}


def test_the_image_keeps_state_outside_the_workspace_on_volumes() -> None:
    """Guards against the gate's key in the workspace (workers can read it, DD-MCP-021) and against a
    read-only root filesystem with nowhere to write: the workspace and the state folder are volumes."""
    env = image_env()
    workspace, state = PurePosixPath(env["LLMC_MCP_WORKSPACE"]), PurePosixPath(env[STATE_DIR_ENV])
    assert not state.is_relative_to(workspace) and not workspace.is_relative_to(state)
    assert set(json.loads(one("VOLUME"))) == {str(workspace), str(state)}
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # nothing written next to the installed modules


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent folders decides."""
    ignored = False
    parts = PurePosixPath(path).parts
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern.removeprefix("!").rstrip("/").removeprefix("**/")
        candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if pattern.removeprefix("!").startswith("**/"):
            candidates += list(parts)
        if any(fnmatch.fnmatchcase(c, body) for c in candidates):
            ignored = not negate
    return ignored


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def build_context(dest: Path) -> Path:
    """The files `docker build .` sends: the checkout's files less what .dockerignore excludes."""
    patterns = dockerignore_patterns()
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT).as_posix()
        if path.is_file() and not dockerignored(relative, patterns):
            (dest / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest / relative)
    return dest


def test_every_file_the_dockerfile_copies_exists_in_the_build_context() -> None:
    """Guards against a COPY of a file that was renamed or that .dockerignore leaves out (the build
    fails at that step, on every machine with Docker)."""
    patterns = dockerignore_patterns()
    sources = []
    for keyword, rest in dockerfile():
        if keyword == "COPY" and not rest.startswith("--from"):
            sources += shlex.split(rest)[:-1]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not dockerignored(source, patterns), source
    assert dockerignored(".venv/bin/python", patterns) and dockerignored(".git/HEAD", patterns)
    assert not dockerignored("llmc_mcp/cli/sample/RGB.byte.tif", patterns)
    assert dockerignored("llmc_mcp/__pycache__/x.pyc", patterns)


def test_the_build_context_builds_the_package(tmp_path: Path) -> None:
    """Guards against a .dockerignore that drops a file the build needs (the README or LICENSE that
    pyproject.toml names): the image's first RUN step, run here on the context Docker would send."""
    context = build_context(tmp_path / "context")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "wheels"),
            str(context),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert list((tmp_path / "wheels").glob("llmc_mcp-*.whl"))


def docker_daemon() -> str:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker is not installed: the image is checked statically only")
    info = subprocess.run([docker, "info"], capture_output=True, text=True)
    if info.returncode != 0:
        pytest.skip(f"no Docker daemon (`docker info`: {info.stderr.strip().splitlines()[-1:]}); "
                    "the image is checked statically only")  # fmt: skip
    return docker


@pytest.fixture(scope="module")
def image() -> Iterator[tuple[str, str]]:
    docker = docker_daemon()
    tag = f"llmc-mcp-test:{os.getpid()}"
    built = subprocess.run([docker, "build", "-q", "-t", tag, str(ROOT)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    yield docker, tag
    subprocess.run([docker, "rmi", "-f", tag], capture_output=True)


@pytest.mark.anyio
async def test_the_image_serves_over_stdio_read_only_and_offline(
    image: tuple[str, str], tmp_path: Path
) -> None:
    """Guards against an image that builds but cannot serve as documented: no network, a read-only
    root, the workspace mounted, the state on its volume; 00_INIT answers and a raster is read."""
    docker, tag = image
    workspace = tmp_path / "ws"
    workspace.mkdir()
    workspace.chmod(0o777)  # the image's user (uid 10001) writes beside the rasters
    shutil.copy(DATA / "RGB.byte.tif", workspace)
    params = StdioServerParameters(
        command=docker,
        args=["run", "-i", "--rm", "--init", "--network", "none", "--read-only", "--tmpfs", "/tmp",
              "-v", f"{workspace}:/workspace", tag],
    )  # fmt: skip
    await serves_code_mode(params)


# ------------------------------------------------------------------------------------------------- uvx


def uvx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv's ``uvx``: this environment's (the test extra installs uv), else one pip installs now."""
    for candidate in (Path(sys.executable).parent / "uvx", shutil.which("uvx")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    base = tmp_path_factory.mktemp("uv")
    venv.create(base / "venv", with_pip=True)
    pip = subprocess.run(
        [base / "venv" / "bin" / "pip", "install", "-q", "uv"], capture_output=True, text=True
    )
    if pip.returncode != 0:
        reason = f"uv could not be installed from the package index: {pip.stderr.strip()[-300:]}"
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)
    return base / "venv" / "bin" / "uvx"


@pytest.mark.anyio
async def test_uvx_from_a_clone_serves_over_stdio(
    tmp_path_factory: pytest.TempPathFactory, workspace_dir: Path, private_state_dir: Path
) -> None:
    """Guards against the README's `uvx --from . llmc-mcp serve` failing from a fresh clone (a build
    backend uv cannot run, package data left out of the build, a console script missing)."""
    command = uvx(tmp_path_factory)
    base = tmp_path_factory.mktemp("uvx")
    clone = base / "llmc-mcp"
    shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE, ".clients", "node_modules"))
    # The machine's own settings (certificates, proxies) pass through; uv's cache is this test's.
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env |= {"UV_CACHE_DIR": str(base / "cache"), STATE_DIR_ENV: str(private_state_dir)}
    version = subprocess.run(
        [command, "--from", ".", "llmc-mcp", "--version"], cwd=clone, env=env, capture_output=True, text=True
    )
    unreachable = re.search(
        r"(?i)dns error|failed to connect|network is unreachable|timed out", version.stderr
    )
    if version.returncode != 0 and not REQUIRED and unreachable:
        pytest.skip(f"uv could not reach the package index: {version.stderr.strip()[-300:]}")
    assert version.returncode == 0, version.stderr[-3000:]
    assert version.stdout.strip() == f"llmc-mcp {__version__}"
    params = StdioServerParameters(
        command=str(command),
        args=["--from", str(clone), "llmc-mcp", "serve", "--workspace", str(workspace_dir)],
        env=env,
        cwd=str(clone),
    )
    await serves_code_mode(params)


# ---------------------------------------------------------------------------------------------- README


def readme_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def llmc_argv(command: str, args: list[str]) -> list[str]:
    """The arguments that reach ``llmc-mcp`` when a host runs ``command args``; fails for a command
    that does not run llmc-mcp (a typo, a script the package does not install)."""
    name = PurePosixPath(command).name
    if name in SCRIPTS:
        return args
    if name == "uvx":
        rest = list(args)
        while rest and rest[0].startswith("-"):
            option = rest.pop(0)
            if option in {"--from", "--python", "--with"}:
                rest.pop(0)
        assert rest and rest[0] in SCRIPTS, args
        return rest[1:]
    if name == "docker":
        assert args[0] == "run" and "-i" in args, args  # stdio needs stdin kept open
        image = max(i for i, a in enumerate(args) if a.split(":")[0].split("/")[-1] == PROJECT)
        entrypoint = json.loads(one("ENTRYPOINT"))
        return [*entrypoint[1:], *(args[image + 1 :] or json.loads(one("CMD")))]
    pytest.fail(f"{command} does not run {sorted(SCRIPTS)}")


def test_every_json_block_in_the_readme_parses_and_runs_a_serve_command() -> None:
    """Guards against a host configuration pasted from the README that the host cannot parse, or that
    names a program or flag that does not exist (the host shows only "server failed to start")."""
    servers = 0
    for block in readme_blocks("json"):
        config = json.loads(block)
        for entries in (config.get("mcpServers"), config.get("servers")):
            for server in (entries or {}).values():
                servers += 1
                if "command" in server:
                    serve_args(llmc_argv(server["command"], server.get("args", [])))
                else:
                    assert re.fullmatch(r"https?://[^/]+/mcp", server["url"]), server
    assert servers


PYTHON_CLIENTS = {  # the module a README block imports -> the client's virtualenv under .clients/
    "pydantic_ai": "pydantic-ai",
    "agents": "openai-agents",
    "langchain_mcp_adapters": "langchain-mcp-adapters",
    "fastmcp": "fastmcp",
}
README_WORKSPACE = "/path/to/rasters"
"""The placeholder the README's blocks use for the user's folder of rasters."""


def client_of(block: str) -> str:
    """The client a Python block is for: the first of PYTHON_CLIENTS it imports (pydantic-ai's blocks
    import fastmcp's transport too, so pydantic_ai is looked for first)."""
    imported = {
        name.split(".")[0]
        for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        )
    }
    return next(venv for module, venv in PYTHON_CLIENTS.items() if module in imported)


def test_the_readme_has_a_python_block_for_every_python_client() -> None:
    """Guards against a client row in the README's table without the code to paste for it."""
    assert sorted(map(client_of, readme_blocks("python"))) == sorted(PYTHON_CLIENTS.values())


@pytest.fixture(scope="module")
def readme_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One home for the README blocks' servers: one kernel warm-up for the four, not one each."""
    return tmp_path_factory.mktemp("readme-home")


@pytest.mark.clients
@pytest.mark.parametrize("client", sorted(PYTHON_CLIENTS.values()))
def test_the_readme_python_block_lists_the_tools_with_its_client(
    client: str, workspace_dir: Path, private_state_dir: Path, readme_home: Path
) -> None:
    """Guards against a pasted block that fails with the pinned client (a renamed class, a wrong
    keyword, a transport spelled the way another client spells it): each block runs, as written but
    for the workspace folder, in its client's virtualenv and prints the three code-mode tools."""
    blocks = [block for block in readme_blocks("python") if client_of(block) == client]
    if not blocks:
        pytest.fail(f"the README has no Python block for {client}")
    python = ROOT / ".clients" / client / "bin" / "python"
    if not python.exists():
        reason = f"{client} is not installed under .clients/ (run scripts/install-python-clients)"
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    # `llmc-mcp` on PATH is this checkout's, as it is after the README's install command.
    env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}
    env[STATE_DIR_ENV] = str(private_state_dir)
    # The block starts the server as written, so the server gets only HOME, PATH and a few more: a
    # home of the test's own keeps its state and kernel cache out of the user's.
    env["HOME"] = str(readme_home)
    for block in blocks:
        code = block.replace(README_WORKSPACE, str(workspace_dir))
        ran = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert sorted(ast.literal_eval(ran.stdout.strip().splitlines()[-1])) == [
            "00_INIT",
            "execute_code",
            "read_stubs",
        ]
