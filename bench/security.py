"""Run the attack corpus through a real code-mode server and print, per category, what held.

Usage: ``python bench/security.py [--timeout S] [--memory-mb MB] [--category NAME ...] [--verbose]``

Every attack in ``tests/security/corpus.py`` is sent to ``execute_code`` over the real in-process
MCP client, in one session (a limit that kills the worker gives the next attack a fresh one).
After each attack the script checks what the test suite checks: the outcome is the expected one
(denied with its precise error, or bounded by a limit), no file appeared outside the workspace,
the reflection gate still refuses an unjustified reprojection, and the server still answers.

The table counts attacks tried, denied, bounded and FAILED. The exit status is 1 if any attack
was neither denied nor bounded as expected, or a check after it failed.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402

from llmc_mcp.config import Settings  # noqa: E402
from llmc_mcp.server.app import build_server  # noqa: E402
from tests.security.corpus import (  # noqa: E402
    CATEGORIES,
    CORPUS,
    GATE_PROBE,
    OTHER_SESSION_SETUP,
    Attack,
    prepare,
    render,
    snapshot,
    verdict,
)


async def execute(client: Client, code: str, reset: bool = False) -> dict[str, Any]:
    result = await client.call_tool("execute_code", {"code": code, "reset": reset})
    return result.structured_content or {}


async def attempt(client: Client, attack: Attack, ws: Path, limit: int) -> tuple[str, str]:
    """Run one attack and the checks after it; ``(outcome, reason)``."""
    around, store = snapshot(ws.parent, skip=ws), snapshot(ws / ".preflight")
    data = await execute(client, render(attack, ws), reset=True)
    outcome, reason = verdict(attack, data, limit)
    escaped = snapshot(ws.parent, skip=ws) ^ around
    if escaped:
        return "FAILED", f"files appeared or vanished outside the workspace: {sorted(escaped)[:3]}"
    if snapshot(ws / ".preflight") != store:
        return "FAILED", "the justification store changed"
    gate = await execute(client, GATE_PROBE)
    if (gate.get("error") or {}).get("type") != "reflection_required" or (ws / "gate_probe.tif").exists():
        return "FAILED", f"the gate did not refuse afterwards: {gate.get('error')}"
    if (await execute(client, "1 + 1")).get("result") != 2:
        return "FAILED", "the server did not answer the next request"
    return outcome, reason


async def run(args: argparse.Namespace) -> int:
    attacks = [a for a in CORPUS if not args.category or a.category in args.category]
    base = Path(tempfile.mkdtemp(prefix="llmc-security-"))
    ws, outside = base / "ws", base / "outside"
    prepare(ws, outside)
    settings = Settings(mode="code", workspace=ws, exec_timeout=args.timeout, memory_mb=args.memory_mb)
    server = build_server(settings)
    rows: dict[str, dict[str, int]] = {
        c: {"tried": 0, "denied": 0, "bounded": 0, "FAILED": 0} for c in CATEGORIES
    }
    failures: list[tuple[Attack, str]] = []
    started = time.perf_counter()
    async with Client(server) as other, Client(server) as client:
        await execute(other, OTHER_SESSION_SETUP)
        for attack in attacks:
            outcome, reason = await attempt(client, attack, ws, settings.output_limit)
            rows[attack.category]["tried"] += 1
            rows[attack.category][outcome] += 1
            if outcome == "FAILED":
                failures.append((attack, reason))
            if args.verbose or outcome == "FAILED":
                print(f"{outcome:8} {attack.id:40} {reason}"[:200], flush=True)
    elapsed = time.perf_counter() - started
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    _table(rows, elapsed, settings)
    for attack, reason in failures:
        print(f"FAILED {attack.id}: {reason}")
    return 1 if failures else 0


def _table(rows: dict[str, dict[str, int]], elapsed: float, settings: Settings) -> None:
    columns = ("tried", "denied", "bounded", "FAILED")
    print(f"\n{'category':12}" + "".join(f"{c:>9}" for c in columns))
    for category, counts in rows.items():
        if counts["tried"]:
            print(f"{category:12}" + "".join(f"{counts[c]:>9}" for c in columns))
    totals = {c: sum(r[c] for r in rows.values()) for c in columns}
    print(f"{'total':12}" + "".join(f"{totals[c]:>9}" for c in columns))
    print(
        f"\n{totals['tried']} attacks in {elapsed:.1f} s (exec_timeout {settings.exec_timeout:g} s, "
        f"memory {settings.memory_mb} MiB, output limit {settings.output_limit})"
    )
    print(
        f"reproduce: cd {shlex.quote(str(ROOT))} && "
        + shlex.join([sys.executable, "bench/security.py", *sys.argv[1:]])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=4.0, help="exec_timeout of the server, s")
    parser.add_argument("--memory-mb", type=int, default=512, help="address-space limit of the worker, MiB")
    parser.add_argument("--category", action="append", choices=CATEGORIES, help="run only these categories")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every attack's outcome")
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspace for inspection")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    sys.exit(anyio.run(run, args))


if __name__ == "__main__":
    main()
