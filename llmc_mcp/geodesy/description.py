"""How results and provenance name a coordinate operation: PROJ's description without axis swaps, its
accuracy in metres, and whether it is a ballpark (datums taken as equal)."""

from __future__ import annotations

import math

from pydantic import Field
from pyproj import Transformer

from llmc_mcp.results import ResultModel


class TransformOperation(ResultModel):
    """A coordinate operation PROJ knows between two CRSs."""

    name: str = Field(description="PROJ's description of the operation, e.g. 'NAD27 to NAD83 (1)'.")
    accuracy_m: float | None = Field(
        description="Accuracy in metres as the EPSG database states it (0 for a pure conversion); null "
        "when unknown."
    )
    ballpark: bool = Field(
        description="True when no real datum shift was available: PROJ took the two datums as the same "
        "(errors of tens to hundreds of metres)."
    )
    missing_grids: list[str] = Field(description="Grid files the operation needs that are not installed.")


def accuracy_of(value: float | None) -> float | None:
    """PROJ's accuracy as metres, or None when unknown (PROJ says -1)."""
    return None if value is None or not math.isfinite(value) or value < 0 else float(value)


def is_ballpark(transformer: Transformer) -> bool:
    """Whether PROJ built the operation without a datum shift (datums taken as equal)."""
    # The flag PROJ sets on an operation it built without a datum shift survives on the steps of a
    # concatenated operation (not through JSON); a single ballpark step is named so by PROJ.
    steps = transformer.operations or ()
    return (
        any(step.has_ballpark_transformation for step in steps)
        or "ballpark" in (transformer.description or "").lower()
    )


def describe_transformer(transformer: Transformer) -> TransformOperation:
    """A transformer as the results name it: PROJ's description without axis swaps, accuracy, ballpark."""
    return TransformOperation(
        name=operation_name(transformer.description or transformer.name),
        accuracy_m=accuracy_of(transformer.accuracy),
        ballpark=is_ballpark(transformer),
        missing_grids=[],
    )


def operation_name(description: str) -> str:
    """PROJ's description without the axis swaps always_xy makes (they say nothing about accuracy)."""
    parts = [part.strip() for part in description.split(" + ")]
    kept = [part for part in parts if not part.lower().startswith("axis order change")]
    return " + ".join(kept) if kept else description
