"""The allowlist of remote prefixes: what is read, what is refused before any request, and redaction.

Every URL is hostile (an agent's argument, a STAC href, a server's redirect); these are the tricks a
prefix comparison on strings would fall for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmc_mcp.config import Settings
from llmc_mcp.errors import PathRefused
from llmc_mcp.gdal.messages import translate_gdal_error
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.remote.allowlist import Allowlist, looks_remote, redact
from llmc_mcp.remote.transport import RemoteLimits
from llmc_mcp.sandbox.bindings import names_a_url
from llmc_mcp.workspace import Workspace

ALLOWED = Allowlist(["https://data.example.org/cogs/", "http://127.0.0.1:8080/mirror/", "s3://open-data/dem/"])


@pytest.mark.parametrize(
    "url",
    [
        "https://data.example.org/cogs/a.tif",
        "https://DATA.example.org/cogs/sub/b.tif",
        "https://data.example.org:443/cogs/a.tif",
        "http://127.0.0.1:8080/mirror/x.tif?sig=abc",
        "s3://open-data/dem/n45e007.tif",
        "https://data.example.org/cogs/with%20space.tif",
        "https://data.example.org/cogs/",
        "https://data.example.org/cogs",
    ],
)
def test_a_url_under_an_allowed_prefix_is_accepted(url: str) -> None:
    """Guards against refusing what the operator allowed: case of the host, the default port written
    out, a query string (signed URLs) and encoded characters do not change where a URL points, and the
    prefix's folder itself (a STAC API's root, with or without its '/') is under it."""
    checked = ALLOWED.check(url, "path")
    assert any(checked.under(p) for p in ALLOWED.prefixes)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://data.example.org/cogsX/a.tif", "not under an allowed prefix"),
        ("https://data.example.org/database.tif", "not under an allowed prefix"),
        ("https://data.example.org/cogs/../secret/a.tif", "'.' or '..'"),
        ("https://data.example.org/cogs/%2e%2e/secret/a.tif", "'.' or '..'"),
        ("https://data.example.org/cogs/a%2f..%2fb.tif", "'.' or '..'"),
        ("https://data.example.org.evil.net/cogs/a.tif", "not under an allowed prefix"),
        ("https://user@data.example.org/cogs/a.tif", "user information"),
        ("https://data.example.org:8443/cogs/a.tif", "not under an allowed prefix"),
        ("http://data.example.org/cogs/a.tif", "not under an allowed prefix"),
        ("https://data.example.org/cogs/a.tif#frag", "fragment"),
        ("https://data.example.org/cogs/a\\b.tif", "'\\'"),
        ("https://data.example.org/cogs/a.tif\n", "control character"),
        ("ftp://data.example.org/cogs/a.tif", "https://, http:// or s3://"),
        ("s3://open-data/other/a.tif", "not under an allowed prefix"),
        ("https://127.0.0.1:8080/mirror/x.tif", "not under an allowed prefix"),
        ("https://data.example.org/cogs/%00.tif", "control character"),
    ],
)
def test_a_url_that_only_looks_allowed_is_refused_naming_why(url: str, reason: str) -> None:
    """Guards against string-prefix matching: a sibling folder, a parent segment (plain or encoded),
    a look-alike host, credentials in the URL, another port or scheme must never pass as allowed."""
    with pytest.raises(PathRefused) as caught:
        ALLOWED.check(url, "path")
    assert reason in caught.value.message


def test_no_prefix_means_no_url_is_read_and_the_refusal_names_the_flag() -> None:
    """Guards against remote reading being on by default: the empty allowlist refuses every URL and
    says how an operator would allow one."""
    with pytest.raises(PathRefused) as caught:
        Allowlist().check("https://data.example.org/cogs/a.tif", "path")
    assert "reads no URLs" in caught.value.message and "--allow-remote" in (caught.value.fix or "")


@pytest.mark.parametrize("prefix", ["https://data.example.org/cogs", "https://x.org/a/?q=1", "ftp://x.org/a/"])
def test_a_prefix_that_could_allow_more_than_meant_is_refused_at_start(prefix: str) -> None:
    """Guards against '/cogs' allowing '/cogs-private/': a prefix ends with '/' and has no query."""
    with pytest.raises(ValueError):
        Settings(allow_remote=(prefix,))


def test_the_variable_holds_prefixes_separated_by_spaces() -> None:
    """Guards against LLMC_MCP_ALLOW_REMOTE being read as one prefix."""
    settings = Settings.model_validate({"allow_remote": "https://a.org/x/ s3://bucket-b/y/"})
    assert settings.allow_remote == ("https://a.org/x/", "s3://bucket-b/y/")


def test_every_query_value_is_redacted_and_the_rest_kept() -> None:
    """Guards against signed URLs leaking their credentials into results, logs or records: no list of
    parameter names keeps up with every service, so every value goes."""
    url = "https://b.s3.amazonaws.com/k.tif?X-Amz-Signature=deadbeef&X-Amz-Credential=AKIA/x&v=1"
    shown = redact(url)
    assert "deadbeef" not in shown and "AKIA" not in shown
    assert shown.startswith("https://b.s3.amazonaws.com/k.tif?X-Amz-Signature=REDACTED")


def test_remote_limits_parse_any_subset_and_refuse_unknown_names() -> None:
    """Guards against a mistyped bound being ignored silently (an option accepted and not applied)."""
    limits = RemoteLimits.parse("timeout=5, call_mb=64")
    assert (limits.timeout, limits.call_mb, limits.retries) == (5.0, 64, 2)
    with pytest.raises(ValueError, match="unknown remote limit"):
        RemoteLimits.parse("timout=5")
    with pytest.raises(ValueError, match="positive"):
        RemoteLimits.parse("parallel=0")


def test_only_https_http_and_s3_look_remote() -> None:
    """Guards against a workspace name being taken for a URL (and the other way round)."""
    assert looks_remote("HTTPS://x.org/a.tif") and looks_remote("s3://b/k.tif")
    assert not looks_remote("data/https.tif") and not looks_remote("file:///etc/passwd")


def test_an_operation_naming_a_url_anywhere_in_its_arguments_is_seen_as_remote() -> None:
    """Guards against a calc input or a merge source that is a URL being sent to a Dask worker, which
    has no remote access: such an operation runs in the session's worker."""
    assert names_a_url({"inputs": [{"name": "a", "path": "https://x.org/a/b.tif"}], "dst": "o.tif"})
    assert names_a_url({"sources": ["a.tif", "s3://b/k.tif"]})
    assert not names_a_url({"src": "a.tif", "dst": "b.tif", "options": {"compress": "deflate"}})


def test_a_gdal_message_naming_a_remote_dataset_shows_its_url_redacted(tmp_path: Path) -> None:
    """Guards against GDAL's name for a remote dataset (rasterio's opener prefix and the signed URL)
    reaching an agent, or its URL being mangled as if it were an absolute path."""
    error = Exception("'/vsiriopener_0a1b/https://h.org/a.tif?sig=s3cr3t' is not a TIFF; see /etc/x/y")
    text = translate_gdal_error(error, OperationContext(Workspace(tmp_path), 1), tmp_path / "a.tif")
    assert text == "'https://h.org/a.tif?sig=REDACTED' is not a TIFF; see <path>"
