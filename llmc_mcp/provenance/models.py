"""What a lineage walk returns: the steps that made a file, its originals, and where the walk stopped."""

from __future__ import annotations

from pydantic import Field

from llmc_mcp.results import ResultModel


class LineageStep(ResultModel):
    """One file made by an operation, as its provenance record tells."""

    path: str = Field(description="Workspace-relative file whose bytes the record claims.")
    sha256: str = Field(description="SHA-256 of the file's bytes.")
    record: str = Field(description="The record that claims them (usually '<path>.provenance.json').")
    operation: str = Field(description="The operation that wrote it, e.g. 'raster.reproject'.")
    finished_at: str = Field(description="When it was written (UTC).")
    inputs: list[str] = Field(description="The files it was made from, as the record names them.")


class LineageStop(ResultModel):
    """Where the walk back could not go on, and why."""

    path: str = Field(description="The input the record names.")
    reason: str = Field(description="Why the walk stopped there: missing, unreadable, or changed since.")


class Lineage(ResultModel):
    """How a file came to be: the steps back to the originals, and where the trail breaks."""

    path: str = Field(description="The file asked about.")
    sha256: str = Field(description="SHA-256 of its bytes.")
    steps: list[LineageStep] = Field(description="Every step found, the file's own first, then its inputs'.")
    originals: list[str] = Field(
        description="Files no record claims: originals, or files made outside llmc-mcp."
    )
    stops: list[LineageStop] = Field(description="Inputs the walk could not follow, with the reason.")
    ignored_records: list[str] = Field(
        description="Record files not believed: unreadable, over 1 MiB, or not conforming to the format."
    )
    unverified_records: list[str] = Field(
        default_factory=list,
        description="Conforming records this server did not sign (planted, from elsewhere, or edited "
        "since): foreign and unverified, never followed.",
    )
