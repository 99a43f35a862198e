"""What llmc-mcp writes into a workspace: bounded by quotas, journaled while in flight, ledgered once done.

Every raster an operation writes goes through three steps, all decided here, in the server:

- :meth:`OutputLedger.begin` checks the quotas (bytes and files per session and per workspace) and a
  free-space reserve, journals the hidden temporary name the write will use (durably, *before* the
  file exists), creates the missing parent directories (journaled too), and grants a byte budget:
  the least of what the session, the workspace and the disk (above the reserve) have left. The
  worker writes under that budget as its file-size limit, so no single write can fill the disk.
- :meth:`OutputLedger.commit` re-checks the quotas against the bytes really written (other sessions
  may have written meanwhile), renames the temporary file and its GDAL sidecars onto ``dst``,
  records the output in the ledger and drops the journal entry.
- :meth:`OutputLedger.abort` (a failed write), :meth:`OutputLedger.discard_worker` (a worker killed
  mid-write: its own cleanup never ran) and :meth:`OutputLedger.sweep` (at server start: what a
  previous server process left) delete the temporary files and the directories the write created.

Files, all under ``<workspace>/.llmc/outputs/``, each replaced atomically:

- ``journal/<server>/<token>.json``: one per write in flight, ``<server>`` naming the server process
  (pid and start time), so a sweep never touches the writes of another live server;
- ``ledger.json``: every output llmc-mcp wrote that still exists: relative path, bytes (with its
  sidecars), session, time, and the inode, mtime and ctime that identify it, each entry signed with
  the justification store's key (which workers cannot read). Usage is summed over it; a file deleted
  or changed by someone else, and an entry that fails authentication, drop out of it when next
  looked at. It is the record :meth:`OutputLedger.remove` (``files.remove``) consults: only files
  llmc-mcp wrote, unchanged since, may be removed.

Sessions of the stateless HTTP era (a fresh key per call) share one session quota, else a
stateless client would never meet its limit.
"""

from llmc_mcp.outputs.guard import LocalOutputs, OutputGuard, RemoteOutputs
from llmc_mcp.outputs.ledger import OutputLedger
from llmc_mcp.outputs.models import (
    SIDECAR_SUFFIXES,
    Grant,
    OutputRecord,
    QuotaExceeded,
    Removal,
    RemoveRefused,
    WriteLimit,
)

__all__ = [
    "SIDECAR_SUFFIXES",
    "Grant",
    "LocalOutputs",
    "OutputGuard",
    "OutputLedger",
    "OutputRecord",
    "QuotaExceeded",
    "RemoteOutputs",
    "Removal",
    "RemoveRefused",
    "WriteLimit",
]
