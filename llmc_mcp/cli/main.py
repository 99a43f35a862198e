"""``llmc-mcp``: serve, write stubs, inspect justifications, run the demo.

Nothing here writes to stdout while serving: over stdio, stdout is the
protocol. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any, NoReturn

from llmc_mcp import __version__
from llmc_mcp.cli import justifications
from llmc_mcp.cli import workflows as workflows_cli

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_ENV = "[env]"
"""Marks a flag that ``LLMC_MCP_<FLAG>`` may also set, once per flag instead of spelling the variable out:
every help text must fit a screen (40 lines)."""


def _formatter(prog: str) -> argparse.HelpFormatter:
    """Help with each flag and its text on one line where the terminal allows (a screen, not a scroll)."""
    return argparse.HelpFormatter(prog, max_help_position=30)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmc-mcp",
        description="MCP server for geospatial raster work (rasterio, pyproj) by agents that write code.",
        epilog="Run 'llmc-mcp demo' to watch a scripted session; 'llmc-mcp serve' for hosts.",
    )
    parser.add_argument("--version", action="version", version=f"llmc-mcp {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="Run the MCP server (stdio by default).",
        usage="%(prog)s [options]",
        description=f"Run the MCP server; {_ENV} flags may be set as LLMC_MCP_<FLAG> too.",
        formatter_class=_formatter,
    )
    serve.add_argument(
        "--mode",
        choices=("code", "classic"),
        default=None,
        help=f"code (default, 3 tools) or classic. {_ENV}",
    )
    serve.add_argument(
        "--tools", default=None, metavar="NS,...", help=f"Classic: only these namespaces' tools. {_ENV}"
    )
    serve.add_argument(
        "--init-tool-name",
        default=None,
        metavar="NAME",
        help=f"00_INIT's name (init: Vertex, Bedrock). {_ENV}",
    )
    serve.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"Root of all paths (default: .). {_ENV}",
    )
    serve.add_argument(
        "--create-workspace", action="store_true", help="Create the workspace if it does not exist."
    )
    serve.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio", help="stdio (default) or streamable HTTP."
    )
    serve.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1).")
    serve.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000).")
    serve.add_argument(
        "--log-level",
        choices=_LOG_LEVELS,
        default="WARNING",
        type=str.upper,
        metavar="LEVEL",
        help="Stderr log level (default WARNING).",
    )
    serve.add_argument(
        "--reflection",
        choices=("hints", "sampling", "auto"),
        default=None,
        metavar="MODE",
        help=f"Missing reason: hints, sampling, auto. {_ENV}",
    )
    serve.add_argument(
        "--min-confidence",
        choices=("low", "medium", "high"),
        default=None,
        metavar="LEVEL",
        help=f"low|medium|high: below it, the user approves. {_ENV}",
    )
    _add_limit_flags(serve)
    _add_job_flags(serve)
    serve.add_argument(
        "--engine", choices=("local", "dask"), default=None, help=f"Pixel work: local or dask. {_ENV}"
    )
    serve.add_argument(
        "--dask-scheduler", default=None, metavar="URL", help=f"tcp://HOST:PORT of a Dask cluster. {_ENV}"
    )
    serve.add_argument(
        "--dask-worker-ports",
        default=None,
        metavar="A:B",
        help=f"Its workers' ports (results come direct). {_ENV}",
    )
    _add_quota_flags(serve)
    serve.add_argument(
        "--allow-remote",
        action="append",
        default=None,
        metavar="PREFIX",
        help=f"Read URLs under this prefix (repeat). {_ENV}",
    )
    serve.add_argument(
        "--remote-limits",
        default=None,
        metavar="K=V,...",
        help=f"Bounds of remote reads (README). {_ENV}",
    )

    stubs = commands.add_parser("stubs", help="Write the code-mode stub modules to a directory and exit.")
    stubs.add_argument("--out", type=Path, required=True, help="Directory to write the stubs into.")

    demo = commands.add_parser(
        "demo", help="Watch a scripted host drive the server over stdio (no LLM needed)."
    )
    demo.add_argument("--mode", choices=("code", "classic"), default="code", help="Which face to drive.")
    demo.add_argument(
        "--keep",
        type=Path,
        default=None,
        metavar="DIR",
        help="Use DIR as the workspace and keep it (default: a temporary directory).",
    )
    demo.add_argument("--plain", action="store_true", help="Plain text even on a terminal.")
    demo.add_argument(
        "--allow-remote",
        default=None,
        metavar="PREFIX",
        help="Add a remote step: the server allows PREFIX, and the demo reads --remote-raster under it.",
    )
    demo.add_argument(
        "--remote-raster",
        default=None,
        metavar="URL",
        help="A (cloud-optimized) GeoTIFF under --allow-remote for the remote step.",
    )

    justifications.add_parser(commands, {"help": "Existing workspace (default: current dir)."})
    workflows_cli.add_parser(commands)

    provenance = commands.add_parser("provenance", help="Trace files by their provenance records.")
    provenance_commands = provenance.add_subparsers(
        dest="provenance_command", metavar="ACTION", required=True
    )
    lineage = provenance_commands.add_parser(
        "lineage", help="Walk a file back to its originals by content (SHA-256), through the records."
    )
    lineage.add_argument("file", type=Path, help="A file in the workspace.")
    lineage.add_argument(
        "--workspace", type=Path, default=None, help="Existing workspace (default: current dir)."
    )
    lineage.add_argument("--json", action="store_true", help="Print the lineage as JSON.")
    validate = provenance_commands.add_parser(
        "validate",
        help="Check provenance records against the manifest format, and that this workspace's server signed "
        "them.",
    )
    validate.add_argument("records", type=Path, nargs="+", help="*.provenance.json files.")
    validate.add_argument(
        "--workspace",
        type=Path,
        default=None,
        help="The workspace whose server must have signed them (default: current dir).",
    )
    return parser


def _add_limit_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--exec-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"Wall time of one call (default 30). {_ENV}",
    )
    parser.add_argument(
        "--idle-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"Reap idle workers (default 900 s). {_ENV}",
    )
    parser.add_argument(
        "--max-workers",
        type=int,
        default=None,
        metavar="N",
        help=f"Sessions (workers) at once (default 32). {_ENV}",
    )
    parser.add_argument(
        "--memory-mb",
        type=int,
        default=None,
        metavar="MIB",
        help=f"Memory of a worker (default 2048). {_ENV}",
    )


_JOB_FLAGS = {
    "job_timeout": (float, "SECONDS", "Wall time of a job or task (default 7200)."),
    "job_memory_mb": (int, "MIB", "Job worker memory (default: --memory-mb)."),
    "max_jobs": (int, "N", "Jobs running on the server (default 4)."),
    "max_session_jobs": (int, "N", "Jobs running per session (default 2)."),
    "task_ttl": (float, "SECONDS", "Ended jobs kept, s (default 86400)."),
    "task_after": (float, "SECONDS", "Call time before a task (2026 era; 2)."),
}


def _add_job_flags(parser: argparse.ArgumentParser) -> None:
    for name, (kind, metavar, text) in _JOB_FLAGS.items():
        parser.add_argument(
            "--" + name.replace("_", "-"), type=kind, default=None, metavar=metavar, help=f"{text} {_ENV}"
        )


_QUOTA_FLAGS = {
    "quota_session_mb": ("MIB", "Output MiB per session (default 2048)."),
    "quota_session_files": ("N", "Output files per session (default 1000)."),
    "quota_workspace_mb": ("MIB", "Output MiB per workspace (default 20480)."),
    "quota_workspace_files": ("N", "Output files per workspace (10000)."),
    "disk_reserve_mb": ("MIB", "Disk space kept free (default 256)."),
}


def _add_quota_flags(parser: argparse.ArgumentParser) -> None:
    for name, (metavar, text) in _QUOTA_FLAGS.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=int,
            default=None,
            metavar=metavar,
            help=f"{text} {_ENV}",
        )
    parser.add_argument(
        "--allow-overwrite-originals",
        action="store_true",
        default=None,
        help=f"Allow dst to replace users' files. {_ENV}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "stubs":
        return _stubs(args)
    if args.command == "justifications":
        return justifications.run(args, _existing_workspace(args.workspace or Path.cwd()))
    if args.command == "provenance":
        return _lineage(args) if args.provenance_command == "lineage" else _validate_records(args)
    if args.command == "demo":
        return _demo(args)
    if args.command == "workflows":
        root = getattr(args, "workspace", None)
        workspace = None if args.workflows_action == "validate" else _existing_workspace(root or Path.cwd())
        return workflows_cli.run(args, workspace)
    parser.print_help()
    return 0


def _fail(message: str) -> NoReturn:
    """A usage error: one line on stderr naming the problem and the fix, exit status 2 (as argparse)."""
    print(f"llmc-mcp: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _existing_workspace(path: Path, *, create: bool = False, flag: str = "") -> Path:
    """``path`` if it is a directory; a mistyped path is an error, never a new empty workspace.

    A server started on a folder that does not exist would otherwise answer every call with "file not
    found" while silently growing ``.llmc/`` and ``.preflight/`` at the typo's location.
    """
    path = path.expanduser()
    if path.is_dir():
        return path
    if path.exists():
        _fail(f"workspace {str(path)!r} is not a directory; pass --workspace with a directory.")
    if create:
        try:
            path.mkdir(parents=True)
        except OSError as exc:
            _fail(f"cannot create workspace {str(path)!r}: {exc.strerror or exc}.")
        return path
    fix = "check --workspace (or LLMC_MCP_WORKSPACE)" + (f", or pass {flag} to create it" if flag else "")
    _fail(f"workspace {str(path)!r} does not exist; {fix}.")


def _settings(args: argparse.Namespace):
    from pydantic import ValidationError

    from llmc_mcp.config import Settings

    try:
        return Settings.from_env(
            mode=getattr(args, "mode", None),
            workspace=getattr(args, "workspace", None),
            exec_timeout=getattr(args, "exec_timeout", None),
            memory_mb=getattr(args, "memory_mb", None),
            idle_ttl=getattr(args, "idle_ttl", None),
            max_workers=getattr(args, "max_workers", None),
            reflection=getattr(args, "reflection", None),
            min_confidence=getattr(args, "min_confidence", None),
            allow_overwrite_originals=getattr(args, "allow_overwrite_originals", None),
            tools=getattr(args, "tools", None),
            init_tool_name=getattr(args, "init_tool_name", None),
            **{name: getattr(args, name, None) for name in _QUOTA_FLAGS},
            **{name: getattr(args, name, None) for name in _JOB_FLAGS},
            engine=args.engine,
            dask_scheduler=args.dask_scheduler,
            dask_worker_ports=args.dask_worker_ports,
            allow_remote=tuple(args.allow_remote) if args.allow_remote else None,
            remote_limits=args.remote_limits,
        )
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        _fail(f"invalid settings: {problems}")


def _serve(args: argparse.Namespace) -> int:
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = _settings(args)
    _existing_workspace(settings.workspace, create=args.create_workspace, flag="--create-workspace")
    # The first session's worker starts now, while the server imports and builds itself (DD-MCP-027).
    from llmc_mcp.sandbox.workers import start_worker_early

    prestarted = start_worker_early(settings, str(Path(settings.workspace).expanduser().resolve()))
    cluster = _engine_cluster(settings)
    if cluster is not None:
        settings = cluster.serving(settings)
    from llmc_mcp.server.app import build_server

    try:
        credentials = None if cluster is None else cluster.credentials
        server = build_server(settings, prestarted=prestarted, engine_credentials=credentials)
        if args.transport == "http":
            server.run("streamable-http", host=args.host, port=args.port)
        else:
            server.run()
    finally:
        if cluster is not None:
            cluster.close()
    return 0


def _engine_cluster(settings: Any) -> Any:
    """The checked Dask cluster of ``--engine dask`` (started here without --dask-scheduler); exits
    with status 2 naming what is missing when it cannot serve this workspace."""
    if settings.engine != "dask":
        return None
    from llmc_mcp.server.cluster import ClusterUnavailable, start_engine

    try:
        cluster = start_engine(settings)
    except ClusterUnavailable as exc:
        _fail(f"--engine dask: {exc}")
    logging.getLogger("llmc_mcp.cli").info("Dask engine at %s, %d workers", cluster.address, cluster.workers)
    return cluster


def _stubs(args: argparse.Namespace) -> int:
    from llmc_mcp.stubs.render import write_stubs

    written = write_stubs(args.out)
    print(f"wrote {len(written)} stub files to {args.out}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from llmc_mcp.cli.demo import RemoteStep, print_transcript, run_demo

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    if (args.allow_remote is None) != (args.remote_raster is None):
        _fail("the remote step needs both --allow-remote PREFIX and --remote-raster URL (a COG under it).")
    remote = RemoteStep(args.allow_remote, args.remote_raster) if args.allow_remote else None
    transcript = run_demo(args.mode, args.keep, remote)
    print_transcript(transcript, color=sys.stdout.isatty() and not args.plain)
    failed = [s.title for s in transcript.steps if s.is_error and "miss" not in s.title]
    if failed:
        print(f"demo failed at: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _lineage(args: argparse.Namespace) -> int:
    from llmc_mcp.errors import LlmcError
    from llmc_mcp.outputs import LocalOutputs, OutputLedger
    from llmc_mcp.provenance.lineage import lineage
    from llmc_mcp.workspace import Workspace

    workspace = Workspace(_existing_workspace(args.workspace or Path.cwd()))
    target = _lineage_target(args.file, workspace.root)
    try:
        name = target.resolve().relative_to(workspace.root).as_posix()
        walked = lineage(workspace, name, LocalOutputs(OutputLedger(workspace)))
    except ValueError:
        _fail(f"{args.file} is not inside the workspace {workspace.root}; pass --workspace.")
    except LlmcError as exc:
        _fail(f"{exc.message} {exc.fix or ''}".strip())
    if args.json:
        print(walked.model_dump_json(indent=1))
        return 0
    for step in walked.steps:
        made_from = ", ".join(step.inputs) or "nothing"
        print(f"{step.path}  <- {step.operation} ({step.finished_at}) <- {made_from}")
    for original in walked.originals:
        print(f"{original}  original (no record claims its bytes)")
    for stop in walked.stops:
        print(f"{stop.path}  stopped: {stop.reason}")
    for ignored in walked.ignored_records:
        print(f"{ignored}  ignored (unreadable or not a conforming record)")
    for foreign in walked.unverified_records:
        print(f"{foreign}  unverified (not signed by this workspace's server: foreign, or edited since)")
    return 0


def _lineage_target(file: Path, root: Path) -> Path:
    """A relative FILE names a file of the workspace (as every path an agent passes does); one that is
    not there may still be a path from the current folder into the workspace."""
    if file.is_absolute():
        return file
    inside = root / file
    from_here = Path.cwd() / file
    return from_here if not inside.exists() and from_here.exists() else inside


def _validate_records(args: argparse.Namespace) -> int:
    """Conformance of each record, then whether this workspace's server signed it; 1 if any fails either."""
    from llmc_mcp.outputs import OutputLedger
    from llmc_mcp.provenance.authenticity import MAX_RECORD_BYTES, verified
    from llmc_mcp.provenance.conformance import problems
    from llmc_mcp.workspace import Workspace

    ledger = OutputLedger(Workspace(_existing_workspace(args.workspace or Path.cwd())))
    failed = False
    for path in args.records:
        try:
            if path.stat().st_size > MAX_RECORD_BYTES:
                raise ValueError(f"over {MAX_RECORD_BYTES} bytes")
            record = json.loads(path.read_text(encoding="utf-8"))
            found = problems(record)
        except (OSError, ValueError, RecursionError) as exc:
            record, found = None, [f"unreadable: {exc}"]
        if not found and not verified([record], ledger.verify_records)[0]:
            found = [
                "conforms, but is unverified: not signed by the llmc-mcp server of "
                f"{ledger.workspace.root} (another producer's or workspace's, planted, or edited since)"
            ]
        for problem in found:
            print(f"{path}: {problem}")
        if not found:
            print(f"{path}: conforms, and this workspace's server signed it")
        failed = failed or bool(found)
    return 1 if failed else 0
