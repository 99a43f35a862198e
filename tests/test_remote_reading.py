"""Reading rasters where they live: allowed URLs, read by ranges, checked like local files, bounded.

A loopback server (``tests/remote_server.py``) serves COGs built here, with range requests and
ETags, and misbehaves on request. Operations run in this process with the server's own client
(:class:`~llmc_mcp.remote.fetcher.Fetcher`); ``tests/test_remote_server_faces.py`` drives the same
through a real server and its confined workers. Expected values come from the COG's generating
formula (``expected_window``), not from another read.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llmc_mcp.capture import capture
from llmc_mcp.config import Quota
from llmc_mcp.errors import PathRefused, RasterError
from llmc_mcp.operations import raster
from llmc_mcp.operations.catalog import Operation, OperationContext
from llmc_mcp.outputs import LocalOutputs, OutputLedger
from llmc_mcp.provenance.lineage import lineage
from llmc_mcp.remote.access import RemoteAccess, configure
from llmc_mcp.remote.allowlist import Allowlist
from llmc_mcp.remote.fetcher import Fetcher
from llmc_mcp.remote.reader import BLOCKS
from llmc_mcp.remote.transport import RemoteError, RemoteLimits, call_scope
from llmc_mcp.workspace import Workspace
from tests.remote_server import (
    HugeLength,
    IgnoreRange,
    RangeServer,
    Redirect,
    Status,
    Trickle,
    make_cog,
)

SIDE = 4096
"""The large COG: 4096 x 4096 uint16 in 512-pixel tiles (64 tiles) with overviews."""
NOISE = np.random.default_rng(25).integers(0, 65535, size=(SIDE, SIDE), dtype=np.uint16)
"""Its cells: noise, so the file is as large as its cells (32 MiB) and every window is distinct."""


@pytest.fixture(scope="module")
def served() -> Iterator[RangeServer]:
    with RangeServer() as server:
        server.files["cogs/big.tif"] = make_cog(None, width=SIDE, height=SIDE, dtype="uint16", fill=NOISE)
        server.files["cogs/small.tif"] = make_cog(None, width=256, height=256, dtype="uint16", blocksize=256)
        server.files["cogs/points-elsewhere.tif"] = make_cog(
            None, width=256, height=256, dtype="uint16", blocksize=256,
            tags={"OVERVIEWS": {"OVERVIEW_FILE": "/etc/passwd"}},
        )  # fmt: skip
        server.files["other/secret.tif"] = server.files["cogs/small.tif"]
        yield server


def access(server: RangeServer, **limits: Any) -> Fetcher:
    fetcher = Fetcher(
        Allowlist([server.base + "cogs/"]), RemoteLimits(**{"timeout": 5, "retries": 0, **limits})
    )
    configure(RemoteAccess(fetcher.allowlist, fetcher))
    BLOCKS.clear()
    server.reset_counters()
    server.behaviours.clear()
    return fetcher


@pytest.fixture
def remote(served: RangeServer) -> Iterator[RangeServer]:
    fetcher = access(served)
    yield served
    configure(None)
    fetcher.close()


@pytest.fixture
def ctx(tmp_path: Path) -> OperationContext:
    workspace = Workspace(tmp_path)
    return OperationContext(workspace, 2, LocalOutputs(OutputLedger(workspace, Quota())))


def call(op: Operation, ctx: OperationContext, **args: Any) -> Any:
    """One operation call as a face makes it (the gate aside): its remote reads share one budget, and
    what it reads is captured for its outputs' provenance records."""
    validated = op.validate(args)
    with call_scope(), capture(op.qualname, validated):
        return op.run(ctx, validated)


def paths_requested(server: RangeServer) -> set[str]:
    return {path for _method, path, _range in server.requests}


def test_a_remote_window_equals_the_generating_formula(remote: RangeServer, ctx: OperationContext) -> None:
    """Guards against ranges stitched at the wrong offsets: a clip of an allowed URL holds exactly the
    cells the COG was made of, and it is written into the workspace."""
    url = remote.url("cogs/big.tif")
    info = call(raster.info, ctx, path=url)
    left, top = info.transform[2], info.transform[5]
    cell = info.transform[0]
    bounds = [left + 1000 * cell, top - 1300 * cell, left + 1300 * cell, top - 1000 * cell]
    result = call(raster.clip, ctx, src=url, dst="out/window.tif", bounds=bounds)
    import rasterio

    with rasterio.open(ctx.workspace.root / "out/window.tif") as out:
        got = out.read(1)
    assert result.output.path == "out/window.tif"
    np.testing.assert_array_equal(got, NOISE[1000:1300, 1000:1300])


def test_a_small_window_of_a_large_cog_reads_a_small_fraction_of_it(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against reading a remote file whole (or tile by tile far beyond the window): sampling
    one point of a 32 MiB COG fetches its header and one tile, a small fraction of its bytes."""
    url = remote.url("cogs/big.tif")
    size = len(remote.files["cogs/big.tif"])
    result = call(raster.sample, ctx, path=url, points=[[500_000 + 2048 * 10 + 5, 5_000_000 - 2048 * 10 - 5]])
    expected = NOISE[2048, 2048]
    assert result.points[0].values == [float(expected)]
    assert remote.bytes_sent < size * 0.03, (remote.bytes_sent, size)
    assert len(remote.requests) <= 4


def test_sidecar_probes_cost_no_request_and_read_nothing_beside_the_file(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against GDAL fetching `.aux.xml`, `.ovr`, `.msk` or `_RPC.TXT` beside a remote file (a
    hostile server could plant georeferencing or a pointer there): only the file itself is requested."""
    call(raster.info, ctx, path=remote.url("cogs/small.tif"))
    assert paths_requested(remote) == {"cogs/small.tif"}


def test_a_remote_file_whose_metadata_names_another_file_is_refused(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against GDAL opening what a remote file's OVERVIEW_FILE names (a local file, a URL)."""
    with pytest.raises(PathRefused, match="OVERVIEWS/OVERVIEW_FILE"):
        call(raster.stats, ctx, path=remote.url("cogs/points-elsewhere.tif"))


def test_a_url_off_the_allowlist_is_refused_before_any_request(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against reaching a URL to find out whether it is allowed: the refusal needs no request."""
    with pytest.raises(PathRefused, match="not under an allowed prefix"):
        call(raster.info, ctx, path=remote.url("other/secret.tif"))
    assert remote.requests == []


def test_nothing_is_read_when_the_operator_allowed_no_prefix(
    served: RangeServer, ctx: OperationContext
) -> None:
    """Guards against remote reading being on by default."""
    configure(None)
    served.reset_counters()
    with pytest.raises(PathRefused, match="reads no URLs"):
        call(raster.info, ctx, path=served.url("cogs/small.tif"))
    assert served.requests == []


def test_a_redirect_within_the_allowlist_is_followed(remote: RangeServer, ctx: OperationContext) -> None:
    """Guards against refusing the redirects object stores make (a moved object, a mirror)."""
    remote.behaviours["cogs/moved.tif"] = Redirect(remote.url("cogs/small.tif"))
    assert call(raster.info, ctx, path=remote.url("cogs/moved.tif")).width == 256


def test_a_redirect_off_the_allowlist_is_refused_and_not_followed(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against an allowed server sending us anywhere: each hop is checked, and the one that
    leaves the prefixes is never requested."""
    remote.behaviours["cogs/leak.tif"] = Redirect(remote.url("other/secret.tif"))
    with pytest.raises(PathRefused, match="reached through a redirect"):
        call(raster.info, ctx, path=remote.url("cogs/leak.tif"))
    assert "other/secret.tif" not in paths_requested(remote)


def test_a_server_that_trickles_bytes_is_cut_off_at_the_deadline(
    served: RangeServer, ctx: OperationContext
) -> None:
    """Guards against a hostile server holding a call forever one byte at a time (each byte arriving
    before a per-read timeout)."""
    fetcher = access(served, timeout=1)
    served.behaviours["cogs/small.tif"] = Trickle(bytes_per_second=20)
    start = time.monotonic()
    try:
        with pytest.raises(RemoteError, match="took longer than 1 s"):
            call(raster.info, ctx, path=served.url("cogs/small.tif"))
    finally:
        configure(None)
        fetcher.close()
    assert time.monotonic() - start < 30  # a bound, not a timing claim: unbounded would hang


def test_a_huge_declared_length_is_refused_unread(remote: RangeServer, ctx: OperationContext) -> None:
    """Guards against allocating or reading what a server declares (a terabyte for a one-byte range)."""
    remote.behaviours["cogs/small.tif"] = HugeLength(declared=10**12)
    with pytest.raises(RemoteError, match="declares a body of 1000000000000 bytes"):
        call(raster.info, ctx, path=remote.url("cogs/small.tif"))


def test_a_server_that_ignores_ranges_is_refused(remote: RangeServer, ctx: OperationContext) -> None:
    """Guards against downloading a whole file to read a window of it."""
    remote.behaviours["cogs/big.tif"] = IgnoreRange()
    with pytest.raises(RemoteError, match="does not answer range requests"):
        call(raster.info, ctx, path=remote.url("cogs/big.tif"))


def test_a_missing_file_names_the_status(remote: RangeServer, ctx: OperationContext) -> None:
    """Guards against a 404 reported as a malformed file."""
    with pytest.raises(RemoteError, match="HTTP 404"):
        call(raster.info, ctx, path=remote.url("cogs/none.tif"))


def test_a_call_stops_at_its_request_budget_with_the_flag_named(
    served: RangeServer, ctx: OperationContext
) -> None:
    """Guards against thousands of tiny ranges: a call may make so many requests, then stops with an
    error naming the bound and the flag, and nothing is written."""
    fetcher = access(served, call_requests=3)
    try:
        with pytest.raises(RemoteError, match="limit of 3 remote requests") as caught:
            call(raster.stats, ctx, path=served.url("cogs/big.tif"))
    finally:
        configure(None)
        fetcher.close()
    assert "--remote-limits call_requests=N" in (caught.value.fix or "")


def test_a_call_stops_at_its_byte_budget_and_writes_nothing(
    served: RangeServer, ctx: OperationContext
) -> None:
    """Guards against one call pulling a whole archive: past its MiB the read stops, the error names
    the flag, and no output is left, only the record of the failure (the audit trail keeps those)."""
    fetcher = access(served, call_mb=1)
    try:
        with pytest.raises(RemoteError, match="limit of 1 MiB") as caught:
            call(raster.convert, ctx, src=served.url("cogs/big.tif"), dst="copy.tif")
    finally:
        configure(None)
        fetcher.close()
    assert "--remote-limits call_mb=N" in (caught.value.fix or "")
    assert sorted(p.name for p in ctx.workspace.root.iterdir() if not p.name.startswith(".")) == [
        "copy.tif.provenance.json"
    ]
    record = json.loads((ctx.workspace.root / "copy.tif.provenance.json").read_text())
    assert record["x-llmc:outcome"] == "failed"


def test_a_file_changed_mid_read_fails_the_call_instead_of_mixing_versions(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against a window stitched from two versions of a file: the first request pins the ETag,
    and a later range of a replaced file is refused by the server (If-Match) and reported."""
    url = remote.url("cogs/big.tif")
    with (
        replaced_mid_read(remote, "cogs/big.tif"),
        pytest.raises(RemoteError, match="changed while it was being read"),
    ):
        call(raster.stats, ctx, path=url)


@contextlib.contextmanager
def replaced_mid_read(server: RangeServer, path: str) -> Iterator[None]:
    """``path`` replaced by another COG after two more requests (the header is read, the tiles are not)."""
    original = server.files[path]
    server.replace_after(path, 2, make_cog(None, width=SIDE, height=SIDE, dtype="uint16"))
    try:
        yield
    finally:
        server.replace(path, original)


def test_a_transient_failure_is_retried_within_the_limit(served: RangeServer, ctx: OperationContext) -> None:
    """Guards against one 503 from an object store failing a call that a retry would complete."""
    from tests.remote_server import Flaky

    fetcher = access(served, retries=2)
    served.behaviours["cogs/small.tif"] = Flaky(failures=2, status=503)
    try:
        assert call(raster.info, ctx, path=served.url("cogs/small.tif")).width == 256
    finally:
        configure(None)
        fetcher.close()


def test_a_persistent_server_error_is_reported_after_the_retries(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against retrying without end: with retries=0 the first 500 is the answer."""
    remote.behaviours["cogs/small.tif"] = Status(500)
    with pytest.raises(RemoteError, match="HTTP 500"):
        call(raster.info, ctx, path=remote.url("cogs/small.tif"))
    assert len(remote.requests) == 1


def test_a_signed_query_string_never_reaches_results_or_provenance(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against credentials in a signed URL leaking into what an agent, a log or a record
    shows: the query values are redacted everywhere but in the request itself."""
    url = remote.url("cogs/small.tif") + "?X-Amz-Signature=s3cr3t&X-Amz-Credential=AKIAEXAMPLE"
    info = call(raster.info, ctx, path=url)
    call(raster.convert, ctx, src=url, dst="signed.tif")
    record = (ctx.workspace.root / "signed.tif.provenance.json").read_text()
    shown = json.dumps(info.model_dump(mode="json")) + record
    assert "s3cr3t" not in shown and "AKIAEXAMPLE" not in shown
    assert any("X-Amz-Signature=s3cr3t" in (query or "") for query in remote.query_strings)


def test_provenance_records_the_version_and_ranges_and_lineage_ends_at_the_url(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against a remote input recorded like a workspace file (a digest of bytes never read
    whole) or walked as if the workspace could say where it came from."""
    url = remote.url("cogs/small.tif")
    call(raster.convert, ctx, src=url, dst="copy.tif")
    record = json.loads((ctx.workspace.root / "copy.tif.provenance.json").read_text())
    (item,) = record["inputs"]
    detail = item["x-llmc:remote"]
    assert item["path"] == url and detail["url"] == url
    assert detail["etag"] and detail["size"] == len(remote.files["cogs/small.tif"])
    assert detail["ranges"] and detail["bytes_read"] == sum(length for _, length in detail["ranges"])
    assert len(item["sha256"]) == 64
    walked = lineage(ctx.workspace, "copy.tif", _Sealed(ctx))
    assert walked.originals == [url]


class _Sealed:
    """The in-process ledger's answers to lineage (which records the server sealed)."""

    def __init__(self, ctx: OperationContext):
        self._outputs = ctx.outputs

    def owned(self) -> list[str]:
        return self._outputs.owned()  # type: ignore[union-attr]

    def verify_records(self, claims: list[Any]) -> list[bool]:
        return self._outputs.verify_records(claims)  # type: ignore[union-attr]


def test_an_output_is_never_a_url(remote: RangeServer, ctx: OperationContext) -> None:
    """Guards against writing anywhere but the workspace."""
    with pytest.raises(PathRefused):
        call(raster.convert, ctx, src=remote.url("cogs/small.tif"), dst=remote.url("cogs/out.tif"))


def test_a_format_that_does_not_read_by_ranges_is_refused_naming_the_fix(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against a remote PNG or ASCII grid being downloaded whole through the opener."""
    remote.files["cogs/grid.asc"] = b"ncols 2\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n1 2\n3 4\n"
    with pytest.raises(RasterError, match="copy other formats into the workspace"):
        call(raster.info, ctx, path=remote.url("cogs/grid.asc"))


def test_s3_requests_are_signed_with_the_servers_own_credentials(
    served: RangeServer, ctx: OperationContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against unsigned requests to a private bucket, or credentials from anywhere but the
    server's environment: an s3:// URL is read from the endpoint the environment names, each request
    signed (SigV4) with the environment's key, which no result or record shows."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDLLMCTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "never-shown-secret")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", served.base.rstrip("/"))
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    served.files["bucket-a/dem/tile.tif"] = served.files["cogs/small.tif"]
    fetcher = Fetcher(Allowlist(["s3://bucket-a/dem/"]), RemoteLimits(timeout=5, retries=0))
    configure(RemoteAccess(fetcher.allowlist, fetcher))
    served.reset_counters()
    try:
        info = call(raster.info, ctx, path="s3://bucket-a/dem/tile.tif")
    finally:
        configure(None)
        fetcher.close()
    assert info.width == 256 and info.path == "s3://bucket-a/dem/tile.tif"
    signatures = [h.get("Authorization", "") for h in served.request_headers]
    assert signatures and all(
        a.startswith("AWS4-HMAC-SHA256 Credential=AKIDLLMCTEST/") and "/eu-west-1/s3/" in a
        for a in signatures
    )
    assert "never-shown-secret" not in json.dumps(info.model_dump(mode="json"))
