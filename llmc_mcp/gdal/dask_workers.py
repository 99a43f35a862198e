"""The same GDAL hardening on every Dask worker as in our own workers, and the check that it holds.

A Dask worker opens the files an agent named, so it gets what a sandbox worker gets before its
first pixel: no driver beyond the allowlist (deregistered, as :func:`disable_network` does), no
network for GDAL or PROJ, and a block cache sized from its memory. :class:`HardenedGdal` is a Dask
worker plugin: the server registers it on the cluster at start, and the scheduler runs its
``setup`` on every worker, present and future (a restarted worker too). The dataset checks and the
path policy need nothing on the worker: the server checks paths before any piece is submitted, and
pieces open files through :func:`~llmc_mcp.gdal.datasets.open_for_read`, which checks each dataset.

:func:`probe_worker` is what the server runs on each worker at start: can it read the workspace at
the server's path (a probe file the server wrote), and is the hardening in force. A worker that
cannot see the workspace would fail every piece; the server refuses to start instead.
"""

from __future__ import annotations

import os
from typing import Any

from distributed import WorkerPlugin

from llmc_mcp.gdal.environment import (
    HARDENED_CONFIG,
    disable_network,
    size_block_cache,
    unexpected_drivers,
)

PLUGIN_NAME = "llmc-mcp-hardened-gdal"
MAX_PROBE_BYTES = 256


class HardenedGdal(WorkerPlugin):
    """A Dask worker plugin applying our GDAL hardening."""

    name = PLUGIN_NAME

    def __init__(self, memory_mb: int):
        self.memory_mb = memory_mb

    def setup(self, worker: Any) -> None:
        harden(self.memory_mb)


def harden(memory_mb: int) -> None:
    """Harden GDAL in this process; raises if a driver beyond the allowlist is still registered."""
    for key, value in HARDENED_CONFIG.items():
        os.environ.setdefault(key, value)
    disable_network()
    size_block_cache(memory_mb)
    left = unexpected_drivers()
    if left:
        raise RuntimeError(f"GDAL drivers beyond the allowlist are registered: {', '.join(left)}")


def probe_worker(path: str, expected: str) -> dict[str, Any]:
    """What one worker reports at start: whether it reads ``path`` and finds ``expected`` there,
    and whether the hardening holds (no unexpected driver, network off)."""
    try:
        with open(path, encoding="utf-8") as handle:
            found = handle.read(MAX_PROBE_BYTES)
        sees = found == expected
    except OSError as exc:
        sees = False
        found = f"{type(exc).__name__}: {exc.strerror or exc}"
    return {
        "sees_workspace": sees,
        "read": found[:80] if not sees else "",
        "unexpected_drivers": unexpected_drivers(),
        "proj_network": os.environ.get("PROJ_NETWORK", ""),
    }
