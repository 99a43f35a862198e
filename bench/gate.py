"""The reflection gate under a large justification store: hit latency, miss-to-hint latency, disk size.

The store is filled through the real gate, as agents fill it: ``Gate.check`` on a
``raster.reproject`` call issues hints, ``Gate.persist`` stores a valid justification for each
(validation, HMAC signature, atomic write with two fsyncs). Distinct decisions come from distinct
target CRSs (EPSG incl. deprecated codes, ESRI, IGNF and IAU_2015 codes from PROJ's database; every
20th EPSG code is held out for misses) and the 14 resampling methods.

Measured, with the baseline in the same run:

- hit: ``Gate.check`` on validated arguments whose two decisions (CRS + resampling) are both stored.
  Baseline: the first 100 records (EPSG codes), checked at 100 records; then the same arguments at
  10,000 records (store size effect), a random mix over all 10,000, each CRS authority separately,
  and random hits with the two record files evicted from the page cache first (posix_fadvise
  DONTNEED on those files only, so nothing else on the machine is affected);
- where a hit's time goes: deciding (CRS normalization by pyproj), keying, store reads (parse + HMAC);
- miss-to-hint: ``Gate.check`` for an unseen CRS (one hint rendered with its prompt text), for a
  held-out EPSG code and for a custom PROJ string; also with the JSON an agent receives;
- persist latency while filling, a slow path of persist, and the store's size on disk.

Run: .venv/bin/python bench/gate.py
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import banner, finish, mib, print_table, quiet_logs, ratio, summary, us
from pyproj.database import query_crs_info

from llmc_mcp.errors import LlmcError
from llmc_mcp.operations import get_operation
from llmc_mcp.operations.raster.models import Resampling
from llmc_mcp.reflection.gate import Gate, ReflectionRequired
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore

TARGET_RECORDS = 10_000
BASELINE_RECORDS = 100
HIT_SAMPLES = 3_000
KIND_SAMPLES = 1_000
COLD_SAMPLES = 500
MISS_SAMPLES = 300
HOLD_OUT_EVERY = 20
FILL_THREADS = 4
AUTHORITIES = (("EPSG", True), ("ESRI", False), ("IGNF", False), ("IAU_2015", False))
METHODS = list(Resampling.__args__)  # type: ignore[attr-defined]
OP = get_operation("raster.reproject")

Args = dict[str, Any]


def candidate_crs(held_out: list[str]) -> Iterator[tuple[str, str]]:
    """(kind, CRS text) for every CRS of the authorities, then custom ones; fills ``held_out``."""
    for auth, deprecated in AUTHORITIES:
        for i, info in enumerate(query_crs_info(auth_name=auth, allow_deprecated=deprecated)):
            text = f"{auth}:{info.code}"
            if auth == "EPSG" and i % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1:
                held_out.append(text)
            else:
                yield auth, text
    lon = 0.0
    while True:  # unbounded supply of distinct custom CRSs, in case the database is smaller
        lon += 0.001
        yield "custom", custom_crs(lon)


def custom_crs(lon: float) -> str:
    return (
        f"+proj=tmerc +lat_0=0 +lon_0={lon:.4f} +k=0.9996 +x_0=500000 +y_0=0 +datum=WGS84 +units=m +no_defs"
    )


def args_for(crs: str, method: str) -> Args:
    return OP.validate({"src": "in.tif", "dst": "out.tif", "dst_crs": crs, "resampling": method})


def justification(domain: str, value: str, alternative: str | None = None) -> dict[str, Any]:
    """A valid justification. The rejected alternative names a CRS code (or another method); a
    free-text alternative in the crs_datum domain is the slow path measured separately."""
    if alternative is None:
        if domain == "crs_datum":
            alternative = "EPSG:3857" if value != "EPSG:3857" else "EPSG:4326"
        else:
            alternative = "nearest" if value != "nearest" else "bilinear"
    return {
        "intent": "Benchmark record: a map overlay that must align with the other layers.",
        "alternatives": [{"method": alternative, "why_not": "The overlay needs the target grid."}],
        "choice": {
            "method": value,
            "rationale": "It matches the overlay.",
            "tradeoffs": "Pixels are resampled.",
        },
        "confidence": "medium",
    }


class Filler:
    """Drives check -> persist through the real gate until the store holds ``n`` records.

    After the first records (sequential, so the 14 resampling methods are stored first), work is
    spread over FILL_THREADS threads, as the server spreads concurrent calls over worker threads:
    the two fsyncs of each persist overlap instead of queueing.
    """

    def __init__(self, gate: Gate):
        self.gate = gate
        self.held_out: list[str] = []
        self.crs = candidate_crs(self.held_out)
        self.hits: list[tuple[str, Args]] = []  # (kind, validated args) whose decisions are all stored
        self.persist_seconds: list[float] = []
        self.skipped = 0
        self.already = 0
        self.i = 0
        self._lock = threading.Lock()

    def stored(self) -> int:
        return sum(1 for _ in self.gate.store.records_dir.rglob("*.json"))

    def fill_to(self, n: int, threads: int = 1) -> None:
        while (missing := n - self.stored()) > 0:
            batch = []
            for _ in range(missing if threads > 1 else 1):
                kind, crs = next(self.crs)
                batch.append((kind, crs, METHODS[self.i % len(METHODS)]))
                self.i += 1
            if threads > 1:
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(self._one, batch))
            else:
                self._one(batch[0])

    def _one(self, item: tuple[str, str, str]) -> None:
        kind, crs, method = item
        try:
            args = args_for(crs, method)
            hints = self.gate.check(OP, args)
        except LlmcError:
            with self._lock:
                self.skipped += 1
            return
        if not hints:  # the CRS normalized to one already stored (an alias)
            with self._lock:
                self.already += 1
            return
        for hint in hints:
            value = next(iter(hint.prompt_args.values()))
            start = time.perf_counter()
            try:
                self.gate.persist(hint.hash, hint.domain, justification(hint.domain, value))
            except LlmcError:
                with self._lock:
                    self.skipped += 1
                return
            with self._lock:
                self.persist_seconds.append(time.perf_counter() - start)
        with self._lock:
            self.hits.append((kind, args))


def check_hits(gate: Gate, chosen: list[Args], before: Callable[[Args], None] | None = None) -> list[float]:
    times = []
    for args in chosen:
        if before is not None:
            before(args)
        start = time.perf_counter()
        hints = gate.check(OP, args)
        times.append(time.perf_counter() - start)
        if hints:
            raise SystemExit(f"expected a hit, got {len(hints)} hint(s) for {args['dst_crs'][:60]}")
    return times


def sample(pool: list[Args], n: int, seed: int) -> list[Args]:
    rng = random.Random(seed)
    return [rng.choice(pool) for _ in range(n)]


def evictor(store: JustificationStore, gate: Gate) -> Callable[[Args], None]:
    def evict(args: Args) -> None:
        for decision in OP.decisions(args):
            fd = os.open(store.path_for(decision.domain, gate.key(decision)), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

    return evict


def breakdown(gate: Gate, store: JustificationStore, chosen: list[Args]) -> dict[str, list[float]]:
    parts: dict[str, list[float]] = {"decide (normalize CRS)": [], "key (sha256)": [], "store.get x2": []}
    for args in chosen:
        t0 = time.perf_counter()
        decisions = OP.decisions(args)
        t1 = time.perf_counter()
        keys = [gate.key(d) for d in decisions]
        t2 = time.perf_counter()
        for d, k in zip(decisions, keys, strict=True):
            assert store.get(d.domain, k) is not None
        t3 = time.perf_counter()
        parts["decide (normalize CRS)"].append(t1 - t0)
        parts["key (sha256)"].append(t2 - t1)
        parts["store.get x2"].append(t3 - t2)
    return parts


def measure_misses(gate: Gate, crs_texts: list[str]) -> tuple[list[float], list[float], int]:
    """Each CRS is checked once (never persisted) with a stored method: one hint per check."""
    check_times, json_times, chars = [], [], 0
    for crs in crs_texts:
        args = args_for(crs, "bilinear")
        start = time.perf_counter()
        hints = gate.check(OP, args)
        middle = time.perf_counter()
        text = json.dumps(ReflectionRequired(hints, gate.next_action).to_dict(), ensure_ascii=False)
        end = time.perf_counter()
        assert len(hints) == 1, hints
        check_times.append(middle - start)
        json_times.append(end - start)
        chars = max(chars, len(text))
    return check_times, json_times, chars


def measure_free_text(gate: Gate, samples: int = 6) -> dict[str, list[float]]:
    """Persist latency of a crs_datum justification by the kind of its rejected alternative."""
    alternatives = {
        "alternative 'EPSG:3857' (a code)": "EPSG:3857",
        "alternative 'a geographic CRS (degrees)' (the prompt's example)": "a geographic CRS (degrees)",
    }
    out: dict[str, list[float]] = {label: [] for label in alternatives}
    for i in range(samples):
        for j, (label, alternative) in enumerate(alternatives.items()):
            (hint,) = gate.check(OP, args_for(custom_crs(170.0 + i * 0.01 + j * 0.001), "bilinear"))
            start = time.perf_counter()
            gate.persist(
                hint.hash, hint.domain, justification(hint.domain, hint.prompt_args["dst_crs"], alternative)
            )
            out[label].append(time.perf_counter() - start)
    return out


def disk_usage(root: Path) -> tuple[int, int, int]:
    files, apparent, allocated = 0, 0, 0
    for path in root.rglob("*"):
        st = path.lstat()
        allocated += st.st_blocks * 512
        if path.is_file():
            files += 1
            apparent += st.st_size
    return files, apparent, allocated


def row(label: str, times: list[float]) -> list[object]:
    s = summary(times)
    return [label, s["n"], us(s["p50"]), us(s["p90"]), us(s["p99"]), us(s["mean"])]


HEAD = ["n", "p50 us", "p90 us", "p99 us", "mean us"]


def main() -> None:
    start = banner("gate.py", f"Gate.check hit/miss latency with {TARGET_RECORDS:,} stored justifications")
    quiet_logs()
    tmp = Path(tempfile.mkdtemp(prefix="llmc-bench-gate-"))
    try:
        store = JustificationStore(tmp / ".preflight")
        gate = Gate(store, PromptLibrary.default(), next_action="persist, then retry")
        filler = Filler(gate)

        filler.fill_to(BASELINE_RECORDS)
        baseline_pool = [args for _, args in filler.hits]
        baseline_args = sample(baseline_pool, HIT_SAMPLES, seed=1)
        check_hits(gate, baseline_args)  # warm-up: pyproj database handles, page cache, allocator
        small = check_hits(gate, baseline_args)

        fill_start = time.perf_counter()
        filler.fill_to(TARGET_RECORDS, threads=FILL_THREADS)
        fill_seconds = time.perf_counter() - fill_start
        on_disk = sum(1 for _ in store.records_dir.rglob("*.json"))
        all_pool = [args for _, args in filler.hits]

        same = check_hits(gate, baseline_args)
        mixed_args = sample(all_pool, HIT_SAMPLES, seed=2)
        mixed = check_hits(gate, mixed_args)
        by_kind = {}
        for kind, _ in AUTHORITIES:
            pool = [args for k, args in filler.hits if k == kind]
            if pool:
                by_kind[kind] = (len(pool), check_hits(gate, sample(pool, KIND_SAMPLES, seed=3)))
        cold = check_hits(gate, random.Random(4).sample(all_pool, COLD_SAMPLES), before=evictor(store, gate))
        parts = breakdown(gate, store, mixed_args)
        miss_epsg = measure_misses(gate, filler.held_out[:MISS_SAMPLES])
        miss_custom = measure_misses(gate, [custom_crs(-170.0 - i * 0.001) for i in range(MISS_SAMPLES // 3)])

        files, apparent, allocated = disk_usage(store.root)
        per_domain = {d.name: sum(1 for _ in d.glob("*.json")) for d in sorted(store.records_dir.iterdir())}
        scan_start = time.perf_counter()
        listed = sum(1 for _ in store.records())
        scan_seconds = time.perf_counter() - scan_start
        free_text = measure_free_text(gate)  # after the size figures: it adds a few records

        rows = [
            row(f"hit, {BASELINE_RECORDS} records, EPSG (baseline)", small),
            row(f"hit, {on_disk:,} records, same args as baseline", same),
            row(f"hit, {on_disk:,} records, random over all", mixed),
            *[row(f"hit, {on_disk:,} records, {k} CRS ({n:,} stored)", t) for k, (n, t) in by_kind.items()],
            row(f"hit, {on_disk:,} records, page cache evicted", cold),
            row("miss -> 1 hint, held-out EPSG code", miss_epsg[0]),
            row("miss -> 1 hint + agent JSON, EPSG", miss_epsg[1]),
            row("miss -> 1 hint, custom PROJ string", miss_custom[0]),
            row("miss -> 1 hint + agent JSON, custom", miss_custom[1]),
        ]
        print_table(["Gate.check (raster.reproject: CRS + resampling)", *HEAD], rows, "Latency")
        print_table(
            ["part of a hit (random over all)", *HEAD],
            [row(k, v) for k, v in parts.items()],
            f"Where a hit's time goes ({on_disk:,} records)",
        )
        print_table(
            ["Gate.persist, crs_datum, custom CRS", *HEAD],
            [row(k, v) for k, v in free_text.items()],
            "Persist slow path: validate_justification runs every alternative through pyproj",
        )
        s_small, s_same, s_mixed = summary(small), summary(same), summary(mixed)
        s_cold, s_miss = summary(cold), summary(miss_epsg[0])
        print_table(
            ["ratio", "p50", "p99"],
            [
                [f"same args: {on_disk:,} / {BASELINE_RECORDS} records", ratio(s_same["p50"], s_small["p50"]),
                 ratio(s_same["p99"], s_small["p99"])],
                [f"random over all {on_disk:,} / baseline", ratio(s_mixed["p50"], s_small["p50"]),
                 ratio(s_mixed["p99"], s_small["p99"])],
                ["page cache evicted / random cached", ratio(s_cold["p50"], s_mixed["p50"]),
                 ratio(s_cold["p99"], s_mixed["p99"])],
                ["miss (EPSG) / hit (same args, 10k)", ratio(s_miss["p50"], s_same["p50"]),
                 ratio(s_miss["p99"], s_same["p99"])],
            ],
            "Ratios",
        )  # fmt: skip
        persist = summary(filler.persist_seconds)
        print_table(
            ["store", "value"],
            [
                ["records (files *.json)", f"{on_disk:,}"],
                ["records per domain", ", ".join(f"{k} {v:,}" for k, v in per_domain.items())],
                ["candidates skipped: invalid / alias", f"{filler.skipped} / {filler.already}"],
                ["files incl. secret.key", f"{files:,}"],
                ["apparent size (sum of sizes)", f"{mib(apparent)} MiB ({apparent / on_disk:,.0f} B/rec)"],
                ["allocated on disk (st_blocks)", f"{mib(allocated)} MiB ({allocated / on_disk:,.0f} B/rec)"],
                [f"fill {BASELINE_RECORDS} -> {on_disk:,}, check + persist, {FILL_THREADS} threads",
                 f"{fill_seconds:.1f} s ({fill_seconds / (on_disk - BASELINE_RECORDS) * 1e3:.1f} ms/record)"],
                ["persist while filling, p50 / p99", f"{us(persist['p50'])} / {us(persist['p99'])} us"],
                ["store.records() full scan (report)", f"{scan_seconds:.2f} s, {listed:,} rec"],
                ["agent JSON of a 1-hint miss (EPSG / custom)", f"{miss_epsg[2]:,} / {miss_custom[2]:,} ch"],
            ],
            "Store",
        )  # fmt: skip
        slow = summary(free_text[list(free_text)[1]])["p50"]
        finish(
            start,
            f"hit p50 {us(s_same['p50'])} us / p99 {us(s_same['p99'])} us at {on_disk:,} records "
            f"({ratio(s_same['p50'], s_small['p50'])} of the {BASELINE_RECORDS}-record p50; random mix p50 "
            f"{us(s_mixed['p50'])} us); miss->hint p50 {us(s_miss['p50'])} us (EPSG); store "
            f"{mib(allocated)} MiB on disk; free-text alternative persist p50 {slow:.2f} s",
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
