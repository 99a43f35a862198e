"""The server's private state folder and the keys kept in it, one per workspace.

Workers may read the whole workspace and the Python runtime, so what authenticates records (the
justification store's key, the provenance seal's) lives outside both, in a folder only the server's
user reads (mode 0700; each key 0600).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import tempfile
from pathlib import Path

from llmc_mcp.durable import os_reason
from llmc_mcp.errors import StoreError
from llmc_mcp.runtime_files import runtime_paths

log = logging.getLogger(__name__)


STATE_DIR_ENV = "LLMC_MCP_STATE_DIR"


def state_dir() -> Path:
    """The server's private state folder: ``$LLMC_MCP_STATE_DIR``, else ``$XDG_STATE_HOME/llmc-mcp``,
    else ``~/.local/state/llmc-mcp`` (the XDG default)."""
    if configured := os.environ.get(STATE_DIR_ENV):
        return Path(configured).expanduser().resolve()
    xdg = os.environ.get("XDG_STATE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return (base / "llmc-mcp").resolve()


def key_path(workspace: Path) -> Path:
    """The key file of one workspace, named by a hash of its resolved path (no path leaks into a name)."""
    digest = hashlib.sha256(os.fsencode(workspace.resolve())).hexdigest()[:32]
    return state_dir() / f"{digest}.key"


def check_private(folder: Path, workspace: Path) -> None:
    """Refuse a state folder a worker could read: inside the workspace or under the worker's Landlock
    read list (its runtime: prefixes, site-packages including the user's under ~/.local, the checkout)."""

    resolved = folder.resolve()
    for readable in (workspace, *map(Path, runtime_paths())):
        if resolved.is_relative_to(readable.resolve()):
            raise StoreError(
                f"The store's key folder {resolved} is inside {readable}, which workers can read.",
                fix=f"Set {STATE_DIR_ENV} to a private folder outside the workspace and the Python runtime.",
            )


def load_or_create_secret(path: Path, legacy: Path | None = None) -> bytes:
    """Read the key, or create it so that concurrent creators agree on one complete key.

    The new key is written in full to a temp file and then hard-linked into
    place: ``link`` fails if the name exists, so a reader never sees a partial
    key and two creators never end up with different ones. A key still at
    ``legacy`` (inside the workspace) becomes the new one, so existing records
    stay valid, and is deleted there once the new file exists: whoever finds
    the legacy file gone finds the new one in place.
    """
    fix = f"Check the permissions of {path.parent} (or set {STATE_DIR_ENV})."
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StoreError(f"Cannot read the store key ({os_reason(exc)}).", fix=fix) from None
    try:
        content = legacy.read_bytes() if legacy is not None else None
    except FileNotFoundError:
        content = None
    except OSError as exc:
        raise StoreError(f"Cannot read the old store key ({os_reason(exc)}).", fix=fix) from None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        fd, tmp = tempfile.mkstemp(prefix=".secret.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(content if content else secrets.token_bytes(32))
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o600)
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
        secret = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"Cannot create the store key ({os_reason(exc)}).", fix=fix) from None
    if content is not None and legacy is not None:
        try:
            legacy.unlink(missing_ok=True)
        except OSError as exc:  # the key works from its new place; the old copy is only a leak
            log.warning("the old store key in the workspace could not be deleted: %s", os_reason(exc))
    return secret
