"""Child-process entry points for the fault tests: ``python -m tests.reliability._faults MODE JSON``.

Each mode does one thing a test then kills, starves or inspects from outside:

- ``write-loop``: persist records into a store forever (new keys, and overwrites of earlier ones);
- ``write-read``: persist this writer's records and a few shared keys, reading everyone's meanwhile;
- ``persist-capped``: persist one record under RLIMIT_FSIZE (SIGXFSZ ignored, so writes get EFBIG);
- ``operation-capped``: run a raster operation under RLIMIT_FSIZE;
- ``operation``: run a raster operation (to be killed midway).

Results are printed as one JSON line on stdout.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import resource
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmc_mcp.errors import LlmcError, RecordExists
from llmc_mcp.reflection.schema import Justification
from llmc_mcp.reflection.store import JustificationStore, Record

DOMAIN_ROTATION = ("crs_datum", "resampling", "format_selection", "aggregation", "hydrology")


def key_for(label: str) -> str:
    return "sha256:" + hashlib.sha256(label.encode()).hexdigest()


def record_for(label: str, version: int = 1, pad: int = 0) -> Record:
    """A valid record whose content says which write produced it (``intent`` carries the version)."""
    domain = DOMAIN_ROTATION[int(hashlib.sha256(label.encode()).hexdigest(), 16) % len(DOMAIN_ROTATION)]
    justification = Justification.model_validate(
        {
            "intent": f"{label} version {version} " + "p" * pad,
            "alternatives": [{"method": "other", "why_not": "It would not do."}],
            "choice": {"method": label, "rationale": "It fits the task.", "tradeoffs": "Some."},
            "confidence": "medium",
        }
    )
    return Record(
        key=key_for(label),
        domain=domain,
        operation="raster.reproject",
        prompt="justify_resampling_method",
        prompt_args={"method": label},
        prompt_hash="sha256:" + "0" * 64,
        justification=justification,
    )


def version_of(record: Record) -> int:
    return int(record.justification.intent.split(" version ")[1].split()[0])


def write_loop(root: str, seed: int) -> None:
    """Persist forever: every third write tries to overwrite an earlier key, which must be refused."""
    store = JustificationStore(Path(root))
    rng = random.Random(seed)
    written: list[str] = []
    versions: dict[str, int] = {}
    i = 0
    while True:
        if written and i % 3 == 0:
            label = rng.choice(written)
        else:
            label = f"w{seed}-{i}"
            written.append(label)
        versions[label] = versions.get(label, 0) + 1
        with contextlib.suppress(RecordExists):
            store.put(record_for(label, versions[label], pad=rng.randrange(0, 3900)))
        i += 1


def write_read(root: str, writer: int, writers: int, count: int, shared: int) -> dict[str, Any]:
    """Persist ``count`` own records and race for ``shared`` common keys, reading all meanwhile."""
    store = JustificationStore(Path(root))
    rng = random.Random(writer)
    seen: set[str] = set()
    problems: list[str] = []
    for i in range(count):
        own = f"p{writer}-{i}"
        store.put(record_for(own))
        got = store.get(record_for(own).domain, key_for(own))
        if got is None:
            problems.append(f"own record {own} unreadable right after put")
        common = f"shared-{i % shared}"
        with contextlib.suppress(RecordExists):
            store.put(record_for(common, version=writer * 1000 + i))
        for _ in range(3):
            other = f"p{rng.randrange(writers)}-{rng.randrange(count)}"
            sample = record_for(other)
            found = store.get(sample.domain, sample.key)
            if found is not None:
                seen.add(other)
            elif other in seen:
                problems.append(f"record {other} was readable, then was not")
            path = store.path_for(sample.domain, sample.key)
            if path.exists() and found is None:
                problems.append(f"record file {path.name} exists but does not verify")
    return {"problems": problems, "seen": len(seen)}


def _cap_file_size(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def persist_capped(root: str, limit: int) -> dict[str, Any]:
    store = JustificationStore(Path(root))
    store._key()  # the key (32 bytes) is written before the cap: the record write is what must fail
    _cap_file_size(limit)
    try:
        store.put(record_for("capped", pad=3900))
    except LlmcError as exc:
        return {"error": exc.to_dict()}
    return {"error": None}


class _AllowAll:
    """A gate that lets everything run: these tests are about writing, not about justifications."""

    def require(self, op: Any, args: Mapping[str, Any], facts: Mapping[str, str]) -> list[Any]:
        return []  # no decision needed a justification


def run_operation(workspace: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    from llmc_mcp.operations import OperationContext, get_operation
    from llmc_mcp.operations.invoke import invoke
    from llmc_mcp.workspace import Workspace

    ctx = OperationContext(Workspace(workspace), num_threads=1)
    started = time.monotonic()
    try:
        result = invoke(get_operation(name), ctx, _AllowAll(), args)
    except LlmcError as exc:
        return {"error": exc.to_dict(), "seconds": time.monotonic() - started}
    return {"error": None, "result": result.model_dump(mode="json"), "seconds": time.monotonic() - started}


def main() -> None:
    mode, params = sys.argv[1], json.loads(sys.argv[2])
    if mode == "write-loop":
        print("ready", flush=True)
        write_loop(params["root"], params["seed"])
    elif mode == "write-read":
        names = ("root", "writer", "writers", "count", "shared")
        out = write_read(*(params[name] for name in names))
        print(json.dumps(out), flush=True)
    elif mode == "persist-capped":
        print(json.dumps(persist_capped(params["root"], params["limit"])), flush=True)
    elif mode == "operation-capped":
        _cap_file_size(params["limit"])
        print(json.dumps(run_operation(params["workspace"], params["operation"], params["args"])), flush=True)
    elif mode == "operation":
        import llmc_mcp.operations.invoke  # noqa: F401  (import first: the kill must land in the work)

        print("ready", flush=True)
        print(json.dumps(run_operation(params["workspace"], params["operation"], params["args"])), flush=True)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
