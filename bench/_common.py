"""Helpers shared by the benchmark scripts: workspaces, tables, percentiles, timing, machine facts.

Every script in ``bench/`` is standalone (``python bench/<name>.py``); this module holds only what
two or more of them need. Nothing here touches the package's own files.
"""

from __future__ import annotations

import logging
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = ROOT / "tests" / "data"
SHARED_DATA = ROOT.parent / "shared" / "data"
"""Optional: a sibling folder of extra rasters, used only when ``tests/data`` is missing."""
SAMPLE = ROOT / "llmc_mcp" / "cli" / "sample" / "RGB.byte.tif"
VENV_BIN = Path(sys.executable).parent
LLMC_BIN = VENV_BIN / "llmc-mcp"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def quiet_logs() -> None:
    """Keep INFO lines (worker ready, workspace ...) out of the printed figures."""
    logging.disable(logging.INFO)


# ------------------------------------------------------------------------------------------ workspace


def source_rasters() -> list[Path]:
    """The repository's test rasters (``tests/data``), else ``../shared/data``, else the package sample."""
    for folder in (TEST_DATA, SHARED_DATA):
        found = sorted(folder.glob("*.tif")) if folder.is_dir() else []
        if found:
            return found
    return [SAMPLE]


def make_workspace(prefix: str = "llmc-bench-", names: Sequence[str] | None = None) -> Path:
    """A fresh temporary directory holding writable copies of the source rasters.

    ``names`` restricts the copy to those files; a requested name missing from the source rasters is
    substituted by the package sample (so scripts still run from an installed package alone).
    """
    root = Path(tempfile.mkdtemp(prefix=prefix))
    sources = {p.name: p for p in source_rasters()}
    wanted = list(names) if names is not None else list(sources)
    for name in wanted:
        shutil.copyfile(sources.get(name, SAMPLE), root / name)
    return root


@contextmanager
def workspace(prefix: str = "llmc-bench-", names: Sequence[str] | None = None) -> Iterator[Path]:
    root = make_workspace(prefix, names)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def stdio_env() -> dict[str, str]:
    """What a stdio server child gets besides the SDK's defaults (HOME, PATH, ...)."""
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "PROJ_DATA", "PROJ_LIB", "GDAL_DATA")
    return {k: os.environ[k] for k in keep if k in os.environ}


# --------------------------------------------------------------------------------------------- figures


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (numpy's default), without numpy."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "min": min(values) if values else math.nan,
        "max": max(values) if values else math.nan,
        "mean": sum(values) / len(values) if values else math.nan,
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def mib(n_bytes: float) -> str:
    return f"{n_bytes / (1 << 20):.1f}"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> None:
    """A GitHub-flavoured Markdown table; numeric-looking columns are right-aligned."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def numeric(i: int) -> bool:
        body = [r[i] for r in cells[1:] if r[i] not in ("", "-", "n/a")]
        return bool(body) and all(_looks_numeric(v) for v in body)

    right = [numeric(i) for i in range(len(headers))]
    if title:
        print(f"\n{title}\n")
    line = "| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)) + " |"
    print(line)
    print(
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if r else ("-" * (w + 2)) for w, r in zip(widths, right, strict=True)
        )
        + "|"
    )
    for row in cells[1:]:
        print(
            "| "
            + " | ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True))
            + " |"
        )


def _looks_numeric(text: str) -> bool:
    stripped = text.rstrip("x%").replace(",", "").replace("+", "").replace("-", "", 1)
    try:
        float(stripped)
    except ValueError:
        return False
    return True


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds``."""

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        self.seconds = math.nan
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


def banner(name: str, what: str) -> float:
    """Print the script's header (machine facts included) and return its start time."""
    print(f"# bench/{name}: {what}")
    print(f"# {machine_line()}")
    return time.perf_counter()


def machine_line() -> str:
    parts = [f"python {platform.python_version()}", f"{os.cpu_count()} CPU"]
    try:
        import rasterio

        parts.append(f"rasterio {rasterio.__version__} (GDAL {rasterio.__gdal_version__})")
    except ImportError:  # pragma: no cover - the package depends on it
        pass
    try:
        with open("/proc/meminfo") as handle:
            total_kb = int(handle.readline().split()[1])
        parts.append(f"{total_kb / (1 << 20):.1f} GiB RAM")
    except OSError:
        pass
    return ", ".join(parts)


def finish(start: float, line: str) -> None:
    """The one-line summary every script ends with."""
    print(f"\nSUMMARY: {line} [{time.perf_counter() - start:.1f} s]")
