"""The example justifications llmc-mcp ships: the demo persists them, the README shows them.

They are the model answers of their own decisions (the demo's reprojection of a Landsat scene for a
web map). Copied with another choice, they argue for what they do not say: the copy check
(:func:`llmc_mcp.reflection.schema.validate_justification`) refuses their text in any justification
but one of the very choice they justify.
"""

from __future__ import annotations

from typing import Any

EXAMPLE_JUSTIFICATIONS: dict[str, dict[str, Any]] = {
    "crs_datum": {
        "intent": "Overlay a Landsat RGB scene on a web map whose layers are stored in WGS 84 lat/lon.",
        "alternatives": [
            {
                "method": "EPSG:3857",
                "why_not": "The other layers are in lat/lon; Web Mercator would need a "
                "second reprojection on display.",
            },
            {
                "method": "keep EPSG:32618",
                "why_not": "The viewer cannot place UTM data next to lat/lon layers.",
            },
        ],
        "choice": {
            "method": "EPSG:4326",
            "rationale": "Same CRS and datum (WGS 84) as every other layer.",
            "tradeoffs": "Degrees are not square on the ground at 35N; areas must not be measured on it.",
        },
        "confidence": "high",
    },
    "resampling": {
        "intent": "Continuous reflectance imagery for viewing; smooth tones matter, exact values do not.",
        "alternatives": [
            {"method": "nearest", "why_not": "Stair-step artefacts along edges when the grid rotates."},
            {"method": "cubic", "why_not": "Overshoots at sharp edges and costs more for no visible gain."},
        ],
        "choice": {
            "method": "bilinear",
            "rationale": "Smooth interpolation of continuous values.",
            "tradeoffs": "Slight smoothing; output values are new (interpolated) numbers.",
        },
        "confidence": "medium",
    },
}
