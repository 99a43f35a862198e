"""Which URLs may be read: the operator's prefixes, and the one normal form every URL is checked in.

A URL reaches us from an agent (an argument), from a STAC answer (an asset href) or from a server
(a redirect's ``Location``); all three are hostile. Each is parsed, refused if it carries what a
prefix match could be fooled by (user info, a fragment, backslashes, ``.``/``..`` segments plain or
percent-encoded, control characters, a non-default way of writing the host or port), put in one
normal form, and only then compared with the prefixes, component by component: scheme, host and
port equal, path starting with the prefix's path (which ends in ``/``, so ``/data/`` never allows
``/database``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from llmc_mcp.errors import PathRefused

Scheme = Literal["https", "http", "s3"]
SCHEMES: tuple[Scheme, ...] = ("https", "http", "s3")
_DEFAULT_PORTS = {"https": 443, "http": 80}
MAX_URL_CHARS = 2048
_HOST = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$")
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def looks_remote(name: object) -> bool:
    """Whether an argument is meant as a URL (and so is checked against the allowlist, not the workspace)."""
    return isinstance(name, str) and name.lower().startswith(("https://", "http://", "s3://"))


@dataclass(frozen=True, order=True)
class RemoteUrl:
    """A URL in normal form: lower-case scheme and host, explicit port (None for s3), decoded path."""

    scheme: Scheme
    host: str
    port: int | None
    path: str
    query: str = ""

    def __str__(self) -> str:
        if self.scheme == "s3":
            base = f"s3://{self.host}"
        else:
            default = _DEFAULT_PORTS[self.scheme]
            port = "" if self.port == default else f":{self.port}"
            base = f"{self.scheme}://{self.host}{port}"
        text = base + quote(self.path, safe="/-._~!$&'()*+,;=@")
        return f"{text}?{self.query}" if self.query else text

    @property
    def redacted(self) -> str:
        """This URL as results, logs and provenance show it: every query value replaced."""
        return redact(str(self))

    def under(self, prefix: RemoteUrl) -> bool:
        return (
            self.scheme == prefix.scheme
            and self.host == prefix.host
            and self.port == prefix.port
            # The folder itself counts (a STAC API's root is often written with or without its '/').
            and (self.path.startswith(prefix.path) or self.path == prefix.path.rstrip("/"))
        )


def parse_url(text: object, argument: str = "url", *, prefix: bool = False) -> RemoteUrl:
    """Parse and normalise a URL, refusing anything a prefix comparison could be fooled by."""
    if not isinstance(text, str):
        raise PathRefused(f"{argument} must be a string, got {type(text).__name__}.", fix=_FIX)
    if len(text) > MAX_URL_CHARS:
        raise PathRefused(f"{argument} is longer than {MAX_URL_CHARS} characters.", fix=_FIX)
    if any(ord(c) < 33 or ord(c) == 127 for c in text) or "\\" in text:
        raise PathRefused(f"{argument}: the URL contains a space, a control character or '\\'.", fix=_FIX)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise PathRefused(f"{argument}: '{redact(text)}' is not a valid URL ({exc}).", fix=_FIX) from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise PathRefused(f"{argument}: '{redact(text)}' is not an https://, http:// or s3:// URL.", fix=_FIX)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise PathRefused(
            f"{argument}: the URL carries user information ('user@' or 'user:password@'); credentials "
            "come only from the operator's environment.",
            fix="Pass the URL without 'user@'.",
        )
    if parts.fragment or text.endswith("#"):
        raise PathRefused(f"{argument}: the URL has a fragment ('#...').", fix="Pass it without '#...'.")
    host = (parts.hostname or "").lower()
    if scheme == "s3":
        if port is not None or not _BUCKET.match(host):
            raise PathRefused(f"{argument}: '{redact(text)}' does not name an S3 bucket.", fix=_FIX)
    elif not (_HOST.match(host) or _IPV4.match(host)):
        raise PathRefused(f"{argument}: '{redact(text)}' has no plain host name.", fix=_FIX)
    segments = [unquote(s) for s in parts.path.split("/")]
    if any(s in (".", "..") or "/" in s or "\\" in s for s in segments):
        raise PathRefused(f"{argument}: '.' or '..' segments (plain or encoded) are not allowed.", fix=_FIX)
    path = unquote(parts.path) or "/"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise PathRefused(f"{argument}: the URL's path contains an encoded control character.", fix=_FIX)
    if prefix:
        if parts.query:
            raise PathRefused(f"{argument}: a prefix has no query string.", fix="Drop the '?...'.")
        if not path.endswith("/"):
            raise PathRefused(
                f"{argument}: a prefix must end with '/' ('{text}/'), so that it cannot allow a longer name.",
                fix=f"Write '{text}/'.",
            )
    resolved_port = None if scheme == "s3" else (port or _DEFAULT_PORTS[scheme])
    return RemoteUrl(scheme, host, resolved_port, path, parts.query)  # type: ignore[arg-type]


class Allowlist:
    """The operator's prefixes; empty (the default) allows nothing."""

    def __init__(self, prefixes: Iterable[str] = ()):
        self.prefixes: tuple[RemoteUrl, ...] = tuple(
            parse_url(p, "--allow-remote", prefix=True) for p in prefixes
        )

    def __bool__(self) -> bool:
        return bool(self.prefixes)

    def __repr__(self) -> str:
        return f"Allowlist({[str(p) for p in self.prefixes]!r})"

    def check(self, url: object, argument: str = "url", *, via: str | None = None) -> RemoteUrl:
        """The URL in normal form if it is under an allowed prefix; else a refusal naming why.

        ``via`` names what led to the URL (a redirect, a STAC asset) for the message.
        """
        if not self.prefixes:
            raise PathRefused(
                f"{argument}: '{redact(str(url))}' is a URL, and this server reads no URLs.",
                fix="Pass a file inside the workspace; the operator can allow URL prefixes with "
                "--allow-remote (LLMC_MCP_ALLOW_REMOTE).",
            )
        parsed = parse_url(url, argument)
        if any(parsed.under(p) for p in self.prefixes):
            return parsed
        how = f" (reached through {via})" if via else ""
        allowed = ", ".join(str(p) for p in self.prefixes)
        raise PathRefused(
            f"{argument}: '{parsed.redacted}'{how} is not under an allowed prefix ({allowed}).",
            fix="Pass a URL under one of those prefixes, or a file inside the workspace; the operator "
            "decides the prefixes (--allow-remote).",
        )


_FIX = "Pass an https:// URL under a prefix the server allows, or a file inside the workspace."


def redact(url: str) -> str:
    """``url`` with every query value replaced: signed URLs carry their credentials there
    (X-Amz-Signature, sig=, token=...), and no list of names keeps up with every service's."""
    head, sep, query = url.partition("?")
    if not sep:
        return url
    pairs = parse_qsl(query, keep_blank_values=True)
    return f"{head}?{urlencode([(k[:64], 'REDACTED') for k, _ in pairs], safe='')}" if pairs else head
