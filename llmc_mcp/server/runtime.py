"""What both faces share for one workspace: the operation context, the store, the gate, the output ledger."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from anyio.abc import Process

from llmc_mcp.compute.engine import local_engine
from llmc_mcp.config import Quota, Settings
from llmc_mcp.gdal.environment import disable_network
from llmc_mcp.operations import OperationContext
from llmc_mcp.outputs import LocalOutputs, OutputLedger
from llmc_mcp.reflection.gate import Gate
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.remote.access import RemoteAccess
from llmc_mcp.remote.access import configure as configure_remote
from llmc_mcp.remote.allowlist import Allowlist
from llmc_mcp.remote.fetcher import Fetcher
from llmc_mcp.workspace import Workspace

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    context: OperationContext
    gate: Gate
    outputs: OutputLedger
    prestarted: Process | None = None
    """A worker the command started before building the server; the pool adopts it as its first spare."""
    engine_credentials: Path | None = None
    """The TLS credentials of the server's own Dask cluster, which its engine workers read at start."""
    fetcher: Fetcher | None = None
    """The server's client for remote files (``--allow-remote``); None when no URL may be read."""

    @classmethod
    def create(
        cls,
        settings: Settings,
        *,
        next_action: str,
        prompts: PromptLibrary | None = None,
        prestarted: Process | None = None,
        engine_credentials: Path | None = None,
    ) -> Runtime:
        disable_network()
        workspace = Workspace(settings.workspace)
        store = JustificationStore(workspace.preflight_dir)
        gate = Gate(store, prompts or PromptLibrary.default(), next_action=next_action)
        log.info("workspace %s, mode %s", workspace.root, settings.mode)
        outputs = OutputLedger(workspace, Quota.from_settings(settings))
        gate.pending.charge_to(outputs)  # open hints share the output quotas and the reserve
        outputs.sweep()  # temporary files of writes a previous server process left unfinished
        engine = local_engine(settings.num_threads)
        context = OperationContext(workspace, settings.num_threads, LocalOutputs(outputs), engine=engine)
        fetcher = None
        if settings.allow_remote:
            fetcher = Fetcher(Allowlist(settings.allow_remote), settings.remote)
        # Operations the server runs itself (the command line) read URLs through the same client.
        configure_remote(RemoteAccess(fetcher.allowlist, fetcher) if fetcher is not None else None)
        return cls(settings, context, gate, outputs, prestarted, engine_credentials, fetcher)
