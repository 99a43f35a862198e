"""What a call that did not run to its end returns: code refused before it reached the worker, a
worker that died, a limit that stopped it, and the steps an agent can take about a timeout."""

from __future__ import annotations

import signal
from typing import Any

from llmc_mcp.sandbox.executor import check_code

CRASH_FIX = "Run the call again: a fresh worker starts. Recreate any variables you need."


def refused_code(code: object) -> dict[str, Any] | None:
    """Refuse code the worker cannot receive, without touching the session's worker."""
    refused = check_code(code)
    return None if refused is None else code_failure(*refused)


def code_failure(kind: str, message: str, fix: str) -> dict[str, Any]:
    """The answer to code refused before it reached the worker: nothing ran, the session is as it was."""
    failure = limit_failure(kind, message + " Nothing ran; the session is unchanged.", fix, reset=False)
    failure["session"] = {"fresh": False, "unchanged": True}
    return failure


def crash_message(returncode: int | None, exc: Exception) -> str:
    """Why the worker died, from its exit status, in words an agent can act on."""
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else str(-returncode)
        cause = {
            "SIGXCPU": "it used up its CPU-time limit",
            "SIGKILL": "it was killed (out of memory?)",
            "SIGSEGV": "it crashed (segmentation fault)",
            "SIGXFSZ": "it wrote a file over the file-size limit",
        }.get(name, f"it was stopped by {name}")
    elif returncode is not None:
        cause = f"it exited with status {returncode}"
    else:
        cause = f"its channel failed ({exc})"
    return f"The code worker died: {cause}. The session was reset: variables from earlier calls are gone."


def timeout_fix(operation: object = None) -> str:
    """What an agent can do about a timeout: only steps the operation (or the API) offers.

    ``operation`` is the classic tool's catalog name when one operation ran; None for agent code,
    which may have called anything, so the steps name the functions that shrink the work.
    """
    from llmc_mcp.operations import CATALOG

    op = next((o for o in CATALOG if o.qualname == operation), None)
    operator = "or ask the server's operator to raise --exec-timeout (LLMC_MCP_EXEC_TIMEOUT)."
    if op is None:
        return (
            "Run long operations as jobs, which outlast the call: job = jobs.start(raster.reproject, ...), "
            "then jobs.wait(job) and jobs.result(job) in later calls. Or do less per call: raster.clip a "
            "part of the input first and work on that, coarsen it with "
            "raster.reproject(..., resolution=...), pass approx=True to raster.stats, or handle fewer files "
            "per execute_code call; " + operator
        )
    fields = op.arguments.model_fields
    steps = []
    if "approx" in fields:
        steps.append("pass approx=true")
    if "bounds" in fields:
        steps.append("pass bounds covering a part")
    if "resolution" in fields:
        steps.append("ask for a coarser resolution")
    if "points" in fields or "pour_points" in fields:
        steps.append("send fewer points per call")
    if op.namespace in ("raster", "terrain", "hydrology") and "bounds" not in fields:
        steps.append(f"run raster_clip on a part of the input first and {op.tool_name} on that part")
    if not steps:
        steps.append("do less per call")
    tasks = "a client that supports MCP tasks gets it as a task instead, which runs up to --job-timeout"
    text = f"{'; '.join(steps)}; {operator} Or: {tasks}."
    return text[0].upper() + text[1:]


def limit_failure(kind: str, message: str, fix: str, *, reset: bool = True) -> dict[str, Any]:
    """The answer to a call a limit stopped; ``reset`` says whether the session lost its variables."""
    return {
        "ok": False,
        "stdout": "",
        "stdout_dropped": 0,
        "result": None,
        "error": {"type": kind, "message": message, "fix": fix, "line": 0, "traceback": ""},
        "session": {"fresh": True, "reset": True} if reset else {"fresh": False},
    }
