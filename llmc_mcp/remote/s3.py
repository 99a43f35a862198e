"""``s3://bucket/key`` as an HTTPS request, signed with the operator's credentials when there are any.

The credentials, region and endpoint come from the server's environment the way every AWS tool finds
them (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, the
shared files, an instance role), through botocore, whose SigV4 signer is the reference one. Nothing an
agent sends reaches them: a URL with user information is refused before this, and the signature goes
into headers that no result, log or record shows. Without credentials requests go unsigned, which
is how public buckets (most open-data archives) are read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from llmc_mcp.remote.allowlist import RemoteUrl


@dataclass(frozen=True)
class S3Signer:
    """Turns an ``s3://`` URL into the HTTPS request that reads it."""

    credentials: Any
    """botocore's frozen credentials, or None (unsigned requests)."""
    region: str
    endpoint: str | None
    """``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` (a local or other S3-compatible store, path-style),
    else None (AWS, virtual-hosted style)."""

    @classmethod
    def from_environment(cls) -> S3Signer:
        import botocore.session

        session = botocore.session.get_session()
        found = (
            None if os.environ.get("AWS_NO_SIGN_REQUEST", "").upper() == "YES" else session.get_credentials()
        )
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        return cls(
            found.get_frozen_credentials() if found else None,
            region,
            endpoint.rstrip("/") if endpoint else None,
        )

    def prepare(self, url: RemoteUrl, method: str) -> tuple[str, dict[str, str]]:
        """The HTTPS URL of ``url``'s object and the headers that sign a ``method`` request for it."""
        key = quote(url.path.lstrip("/"), safe="/-._~")
        if self.endpoint:
            target = f"{self.endpoint}/{url.host}/{key}"
        else:
            target = f"https://{url.host}.s3.{self.region}.amazonaws.com/{key}"
        if url.query:
            target += f"?{url.query}"
        if self.credentials is None:
            return target, {}
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=target, headers={})
        S3SigV4Auth(self.credentials, "s3", self.region).add_auth(request)
        return target, {k: v for k, v in request.headers.items() if k.lower() != "host"}
