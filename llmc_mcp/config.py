"""Server settings: one pydantic model, filled from CLI flags and ``LLMC_MCP_*`` variables."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from llmc_mcp.errors import PathRefused
from llmc_mcp.remote.allowlist import Allowlist
from llmc_mcp.remote.transport import RemoteLimits

Mode = Literal["code", "classic"]


_QUOTAS = (
    "quota_session_mb",
    "quota_session_files",
    "quota_workspace_mb",
    "quota_workspace_files",
    "disk_reserve_mb",
)


_JOBS = ("job_timeout", "job_memory_mb", "max_jobs", "max_session_jobs", "task_ttl", "task_after")
_ENGINE = ("engine", "dask_scheduler", "dask_worker_ports")

Engine = Literal["local", "dask"]


CATALOG_NAMESPACES = ("raster", "crs", "files", "provenance", "terrain", "hydrology", "workflows", "stac")
"""The catalog's namespaces in its order, for ``--tools``. Settings sit below the catalog (every layer
reads them), so they name its namespaces rather than import it; a test checks the two agree."""


class Settings(BaseModel):
    mode: Mode = "code"
    workspace: Path = Field(default_factory=Path.cwd)
    exec_timeout: float = Field(
        30.0, gt=0, le=3600, description="Wall-time limit of one execute_code call, s."
    )
    memory_mb: int = Field(2048, ge=256, description="Address-space limit of a code-mode worker, MiB.")
    output_limit: int = Field(20_000, ge=1000, description="Characters of printed output kept per call.")
    num_threads: int = Field(default_factory=lambda: min(4, os.cpu_count() or 1), ge=1, le=64)
    idle_ttl: float = Field(
        900.0, gt=0, description="Seconds after which an idle session's worker is reaped."
    )
    max_workers: int = Field(32, ge=1, le=1024, description="Code-mode workers (sessions) alive at once.")
    quota_session_mb: int = Field(2048, ge=1, description="Bytes of outputs one session may keep, MiB.")
    quota_session_files: int = Field(1000, ge=1, description="Output files one session may keep.")
    quota_workspace_mb: int = Field(20480, ge=1, description="Bytes of outputs in the workspace, MiB.")
    quota_workspace_files: int = Field(10_000, ge=1, description="Output files in the workspace.")
    disk_reserve_mb: int = Field(
        256, ge=0, description="Free disk space no output may take, kept for the server's records, MiB."
    )
    allow_overwrite_originals: bool = Field(
        False,
        description="Let an operation's dst replace a file llmc-mcp did not write (and its sidecars); by "
        "default only llmc-mcp's own outputs are replaced. files.remove never deletes such files.",
    )

    tools: tuple[str, ...] | None = Field(
        None,
        description="Classic mode: serve only the tools of these catalog namespaces ('raster,crs'); "
        "persist_justification and the prompts always. None: every tool.",
    )

    init_tool_name: str = Field(
        "00_INIT",
        pattern=r"^(00_INIT|[A-Za-z][A-Za-z0-9_-]{0,63})$",
        description="Code mode: the name of the guide tool. 00_INIT by default; hosts whose tool names must "
        "begin with a letter (Vertex AI, Bedrock) take another, such as 'init'.",
    )

    reflection: Literal["hints", "sampling", "auto"] = Field(
        "auto",
        description="How a missing justification is obtained: 'hints' (the agent answers), 'sampling' (the "
        "host's model, via MCP sampling; hints with the reason when it cannot), 'auto' (sampling when the "
        "client can sample, else hints).",
    )
    min_confidence: Literal["low", "medium", "high"] = Field(
        "low",
        description="A justification less confident than this needs the user's approval (MCP elicitation); "
        "without elicitation the call is refused. 'low' asks no one.",
    )
    review_timeout: float = Field(
        300.0, gt=0, le=3600, description="Seconds the user has to answer a review."
    )
    sampling_timeout: float = Field(
        60.0, gt=0, le=600, description="Seconds the host's model has to answer one sampling request."
    )
    workflow_ttl_hours: float = Field(
        168.0, gt=0, description="Hours a workflow run is kept after its last step (then it expires)."
    )
    job_timeout: float = Field(
        7200.0, gt=0, le=7 * 24 * 3600, description="Wall-time limit of one job or task, s."
    )
    job_memory_mb: int | None = Field(
        None, ge=256, description="Address-space limit of a job's worker, MiB (default: --memory-mb)."
    )
    max_jobs: int = Field(4, ge=1, le=256, description="Jobs and tasks running at once on the server.")
    max_session_jobs: int = Field(2, ge=1, le=64, description="Jobs and tasks one session may run at once.")
    task_ttl: float = Field(
        86400.0,
        gt=0,
        le=30 * 24 * 3600,
        description="Seconds a finished job or task, and its result, stays retrievable (then it expires).",
    )
    task_after: float = Field(
        2.0,
        ge=0,
        le=3600,
        description="2026-07-28 era: seconds a call from a client that declared tasks may run before it "
        "is handed back as a task (its result comes inline if it finishes sooner).",
    )

    engine: Engine = Field(
        "local",
        description="Where pixel work runs: 'local' (each worker, window by window) or 'dask' (a Dask "
        "cluster: --dask-scheduler's, or one started here with a worker per core).",
    )
    dask_scheduler: str | None = Field(
        None,
        pattern=r"^(tcp|tls)://[A-Za-z0-9_.\-\[\]:]{1,255}:[0-9]{1,5}$",
        description="The scheduler of an existing Dask cluster (tcp://HOST:PORT); its workers must see "
        "the workspace at the same path. Implies --engine dask.",
    )
    dask_worker_ports: str | None = Field(
        None,
        pattern=r"^[0-9]{1,5}:[0-9]{1,5}$",
        description="FIRST:LAST, the ports the --dask-scheduler cluster's workers listen on (`dask worker "
        "--worker-port FIRST:LAST`): the engine workers then take results from them directly, not "
        "through the scheduler. The server's own cluster always does.",
    )

    kernel_cache: Path | None = Field(
        default_factory=lambda: default_kernel_cache(),
        description="Where the server keeps the routing kernels' compiled code for its workers to read "
        "(LLMC_MCP_KERNEL_CACHE; 'off' for none); default $XDG_CACHE_HOME/llmc-mcp/kernels. Not used "
        "inside the workspace.",
    )

    allow_remote: tuple[str, ...] = Field(
        (),
        description="URL prefixes remote rasters and STAC catalogs may be read from (https://host/path/, "
        "http://host:port/path/ for local mirrors, s3://bucket/prefix/); none by default: no URL is read.",
    )
    remote_limits: str = Field(
        "",
        description="Bounds on remote reading: timeout=S,retries=N,call_mb=MIB,call_requests=N,parallel=N,"
        "document_kb=KIB (any subset; see RemoteLimits for the defaults).",
    )

    @field_validator("allow_remote", mode="before")
    @classmethod
    def _prefix_list(cls, value: object) -> object:
        # The variable holds prefixes separated by spaces (commas may occur in URLs).
        return tuple(value.split()) if isinstance(value, str) else value

    @field_validator("allow_remote")
    @classmethod
    def _valid_prefixes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            Allowlist(value)
        except PathRefused as exc:
            raise ValueError(exc.message) from None
        return value

    @field_validator("remote_limits")
    @classmethod
    def _valid_limits(cls, value: str) -> str:
        RemoteLimits.parse(value)
        return value

    @property
    def remote(self) -> RemoteLimits:
        return RemoteLimits.parse(self.remote_limits)

    @field_validator("tools", mode="before")
    @classmethod
    def _namespaces(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        return tuple(name.strip() for name in value.split(",") if name.strip())

    @field_validator("tools")
    @classmethod
    def _known_namespaces(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        unknown = [name for name in value if name not in CATALOG_NAMESPACES]
        if unknown or not value:
            raise ValueError(f"unknown namespace(s) {unknown}; choose from {','.join(CATALOG_NAMESPACES)}")
        return value

    @field_validator("init_tool_name")
    @classmethod
    def _init_name_is_free(cls, value: str) -> str:
        if value in ("read_stubs", "execute_code"):
            raise ValueError(f"init_tool_name {value!r} is the name of another code-mode tool; choose one")
        return value

    @field_validator("dask_worker_ports")
    @classmethod
    def _a_bounded_port_range(cls, value: str | None) -> str | None:
        if value is not None:
            worker_ports(value)
        return value

    @model_validator(mode="after")
    def _scheduler_means_dask(self) -> Settings:
        if self.dask_scheduler is not None and self.engine != "dask":
            if "engine" in self.model_fields_set:
                raise ValueError("dask_scheduler names a Dask cluster: use --engine dask, or drop it")
            self.engine = "dask"
        if self.dask_worker_ports is not None and self.dask_scheduler is None:
            raise ValueError(
                "dask_worker_ports names the ports of --dask-scheduler's workers: give the scheduler too "
                "(the server's own cluster chooses its workers' ports)"
            )
        return self

    @model_validator(mode="after")
    def _tools_are_classic(self) -> Settings:
        if self.tools is not None and self.mode != "classic":
            raise ValueError("tools selects classic-mode tools: add --mode classic, or drop --tools")
        return self

    @field_validator("kernel_cache", mode="before")
    @classmethod
    def _off_is_none(cls, value: object) -> object:
        return None if value == "off" else value

    @property
    def kernel_cache_root(self) -> Path | None:
        """The kernel cache, unless it lies inside the workspace, which the workers may write: a cache
        they could write would let one session plant code for another (DD-MCP-100)."""
        if self.kernel_cache is None:
            return None
        cache = self.kernel_cache.expanduser().resolve()
        if cache.is_relative_to(Path(self.workspace).expanduser().resolve()):
            return None
        return cache

    @property
    def job_memory(self) -> int:
        """A job worker's memory limit, MiB: ``--job-memory-mb``, else a call's (``--memory-mb``)."""
        return self.job_memory_mb or self.memory_mb

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Flags win over ``LLMC_MCP_*`` variables, which win over defaults."""
        env = {
            "mode": os.environ.get("LLMC_MCP_MODE"),
            "workspace": os.environ.get("LLMC_MCP_WORKSPACE"),
            "exec_timeout": os.environ.get("LLMC_MCP_EXEC_TIMEOUT"),
            "memory_mb": os.environ.get("LLMC_MCP_MEMORY_MB"),
            "idle_ttl": os.environ.get("LLMC_MCP_IDLE_TTL"),
            "max_workers": os.environ.get("LLMC_MCP_MAX_WORKERS"),
            "workflow_ttl_hours": os.environ.get("LLMC_MCP_WORKFLOW_TTL_HOURS"),
            **{name: os.environ.get(f"LLMC_MCP_{name.upper()}") for name in _JOBS + _ENGINE},
            "reflection": os.environ.get("LLMC_MCP_REFLECTION"),
            "sampling_timeout": os.environ.get("LLMC_MCP_SAMPLING_TIMEOUT"),
            "min_confidence": os.environ.get("LLMC_MCP_MIN_CONFIDENCE"),
            "review_timeout": os.environ.get("LLMC_MCP_REVIEW_TIMEOUT"),
            "allow_overwrite_originals": os.environ.get("LLMC_MCP_ALLOW_OVERWRITE_ORIGINALS"),
            "tools": os.environ.get("LLMC_MCP_TOOLS"),
            "allow_remote": os.environ.get("LLMC_MCP_ALLOW_REMOTE"),
            "remote_limits": os.environ.get("LLMC_MCP_REMOTE_LIMITS"),
            "init_tool_name": os.environ.get("LLMC_MCP_INIT_TOOL_NAME"),
            **{name: os.environ.get(f"LLMC_MCP_{name.upper()}") for name in _QUOTAS},
        }
        values = {k: v for k, v in env.items() if v}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)


def default_kernel_cache() -> Path | None:
    """``LLMC_MCP_KERNEL_CACHE`` ('off': none), else ``$XDG_CACHE_HOME/llmc-mcp/kernels`` (``~/.cache``
    when unset)."""
    value = os.environ.get("LLMC_MCP_KERNEL_CACHE")
    if value == "off":
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llmc-mcp" / "kernels"


MAX_WORKER_PORTS = 1024
"""The widest ``--dask-worker-ports`` range: each port is a rule of the engine workers' confinement."""


def worker_ports(text: str) -> range:
    """The ports of ``FIRST:LAST`` (both included); ``ValueError`` naming the problem."""
    first, _, last = text.partition(":")
    ports = range(int(first), int(last) + 1)
    if not (ports and ports[0] >= 1 and ports[-1] <= 65535):
        raise ValueError(f"{text!r} is not a port range: FIRST:LAST with 1 <= FIRST <= LAST <= 65535")
    if len(ports) > MAX_WORKER_PORTS:
        raise ValueError(f"{text!r} spans {len(ports)} ports; at most {MAX_WORKER_PORTS}")
    return ports


MiB = 1024 * 1024


@dataclass(frozen=True)
class Quota:
    """Limits on what llmc-mcp writes; set by the ``--quota-*``, ``--disk-reserve-mb`` and
    ``--allow-overwrite-originals`` flags."""

    session_bytes: int = 2048 * MiB
    session_files: int = 1000
    workspace_bytes: int = 20 * 1024 * MiB
    workspace_files: int = 10_000
    reserve_bytes: int = 256 * MiB
    overwrite_originals: bool = False
    """Whether a write may replace a file llmc-mcp did not write (``--allow-overwrite-originals``); by
    default only llmc-mcp's own outputs are ever replaced."""

    @classmethod
    def from_settings(cls, settings: Settings) -> Quota:
        return cls(
            session_bytes=settings.quota_session_mb * MiB,
            session_files=settings.quota_session_files,
            workspace_bytes=settings.quota_workspace_mb * MiB,
            workspace_files=settings.quota_workspace_files,
            reserve_bytes=settings.disk_reserve_mb * MiB,
            overwrite_originals=settings.allow_overwrite_originals,
        )
