"""Errors a caller can act on.

Every error that crosses a face (classic tool, execute_code, CLI) is an
`LlmcError`: it names what went wrong and, where there is one, the fix. Faces
render `to_dict()`; nothing else about an exception is shown to the agent, so
library internals (GDAL messages with absolute paths, tracebacks) never leak
by accident.

One vocabulary (DD-MCP-033): a class is named in CamelCase, as Python names
classes (`InvalidArgument`, `ReflectionRequired`); its `kind` is snake_case
(`invalid_argument`, `reflection_required`) and is the only name an agent
sees: the `type` of a classic result, `ApiError.type` in the sandbox, and
execute_code's `error.type` for an API error. Docstrings shown to agents name
errors by kind, never by these class names (the sandbox has only ApiError).
"""

from __future__ import annotations

from typing import Any


class LlmcError(Exception):
    """Base class: a message that says what went wrong and a fix that says what to do."""

    kind = "error"

    def __init__(self, message: str, *, fix: str | None = None, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.details = details or {}

    def __str__(self) -> str:
        return f"{self.message} Fix: {self.fix}" if self.fix else self.message

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "message": self.message}
        if self.fix:
            out["fix"] = self.fix
        if self.details:
            out["details"] = self.details
        return out


class InvalidArgument(LlmcError):
    """An argument has the wrong type, an unknown value, or conflicts with another."""

    kind = "invalid_argument"


class PathRefused(LlmcError):
    """A path argument is not a plain relative name inside the workspace."""

    kind = "path_refused"


class NotFound(LlmcError):
    """An input file, prompt or record does not exist."""

    kind = "not_found"


class RasterError(LlmcError):
    """GDAL could not read or write a raster; the message says which file and why."""

    kind = "raster_error"


class Refused(LlmcError):
    """The inputs can be read, but the answer asked for would be ambiguous, meaningless or wrong.

    A deliberate refusal, not a failure: two georeferencings that disagree, rasters on different
    grids, zones with no area, a layer with no features. The message names what makes the answer
    unsafe and the fix names the input or argument that makes it safe. Kept apart from
    ``raster_error`` (a file GDAL cannot read or write) so that an agent retries the right way:
    rereading a file never helps here, changing the request does.
    """

    kind = "refused"


class CrsError(LlmcError):
    """A CRS definition could not be understood by PROJ."""

    kind = "crs_error"


class JustificationInvalid(LlmcError):
    """A justification failed validation; `details["errors"]` lists field-level problems."""

    kind = "justification_invalid"


class StoreError(LlmcError):
    """The justification store could not be written (full disk, read-only, permissions)."""

    kind = "store_error"


class RecordExists(LlmcError):
    """A justification record already exists for this decision; records are write-once."""

    kind = "record_exists"


class OutOfMemory(LlmcError):
    """An operation needed more memory than its worker may use (``--memory-mb``).

    Its own kind, not ``internal_error``: nothing is wrong with the arguments or the server, and the
    fix is a smaller request or a larger limit, which the message names.
    """

    kind = "out_of_memory"

    @classmethod
    def in_this_process(cls) -> OutOfMemory:
        """The error for this process's own limit: its address space (the worker's ``--memory-mb``)."""
        import resource

        limit, _hard = resource.getrlimit(resource.RLIMIT_AS)
        shown = "no limit" if limit == resource.RLIM_INFINITY else f"{limit >> 20} MiB"
        return cls(
            f"The operation ran out of memory: its worker may use {shown} (--memory-mb).",
            fix="Make the input smaller: clip a part first (raster.clip; raster_clip in classic mode) or "
            "coarsen it (raster.reproject's resolution), pass approx=True where the function offers it, "
            "or ask the server's operator to raise --memory-mb (LLMC_MCP_MEMORY_MB).",
            details={"limit_mb": None if limit == resource.RLIM_INFINITY else limit >> 20},
        )
