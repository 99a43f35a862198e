"""CRS text from agents: one set of rules for every place a CRS definition arrives.

``crs.info``, ``raster.reproject`` and the reflection gate's decision keys all turn user text into
a CRS. They must refuse the same inputs (PROJ ``+init=`` files, oversized or non-Unicode text) and
agree on which authority code a definition is, or a definition refused in one place could be
accepted, cached or justified through another. This module sits outside ``llmc_mcp.operations`` so
that ``llmc_mcp.reflection.specs`` can import it: the operation catalog imports the specs, and
importing anything under ``llmc_mcp.operations`` from there would be a cycle.
"""

from __future__ import annotations

import re

from pyproj import CRS
from pyproj.exceptions import CRSError

from llmc_mcp.errors import CrsError

_CRS_FIX = "Pass an EPSG code ('EPSG:4326'), WKT, a PROJ string or PROJJSON."
MAX_CRS_CHARS = 100_000
"""Far above any real WKT or PROJJSON (EPSG's longest are ~10 k characters)."""

# PROJ "+init=file:key" reads definition files (absolute paths included); EPSG codes cover every real use.
_INIT = re.compile(r"(^|[\s+])init\s*=", re.IGNORECASE)
_GRID_PATH = re.compile(
    r"grids\s*=\s*[^\s+]*[/\\]"  # +nadgrids=/abs/file, +geoidgrids=@../x
    r"|parameterfile\s*\[[^\]]*[/\\]"  # WKT PARAMETERFILE["...","/abs/file"]
    r"|file\"\s*,\s*\"value\"\s*:\s*\"[^\"]*[/\\]",  # PROJJSON {"name": "... file", "value": "/x"}
    re.IGNORECASE,
)
"""A grid named by path: PROJ would open that file (anywhere on disk) while parsing."""


def parse_crs(value: str, argument: str = "crs") -> CRS:
    """A pyproj CRS from any user text PROJ understands, or a :class:`CrsError` with the fix.

    Messages quote at most the first 200 characters of the input: PROJ's own message echoes all of it.
    """
    text = str(value).strip()
    if len(text) > MAX_CRS_CHARS:
        raise CrsError(
            f"{argument} is {len(text)} characters long; no CRS definition needs more than {MAX_CRS_CHARS}.",
            fix=_CRS_FIX,
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # PROJ takes UTF-8; a lone surrogate would escape as an internal error instead.
        raise CrsError(
            f"{argument} contains characters that are not valid Unicode (lone surrogates).", fix=_CRS_FIX
        ) from None
    if _INIT.search(text):
        raise CrsError(
            f"{argument}: PROJ '+init=' definitions are not accepted ({text[:200]!r}).",
            fix="Use the EPSG code instead, e.g. 'EPSG:4326' for '+init=epsg:4326'.",
        )
    if _GRID_PATH.search(text):
        raise CrsError(
            f"{argument}: grid files given by path are not accepted ({text[:200]!r}).",
            fix="Name grids without a directory (e.g. '+nadgrids=conus'), or use an EPSG code.",
        )
    try:
        return CRS.from_user_input(text)
    except CRSError as exc:
        reason = str(exc).replace(text, "<input>")[:300]
        raise CrsError(f"Unknown CRS {text[:200]!r}: {reason}", fix=_CRS_FIX) from None


def identify(crs: CRS) -> tuple[int | None, str | None]:
    """The EPSG code and the preferred 'AUTH:CODE' of an exact (100%) match, in one PROJ search.

    A bound CRS (+towgs84) is never an authority CRS, and PROJ's search for one takes many seconds.
    """
    if crs.is_bound:
        return None, None
    matches = crs.list_authority(min_confidence=100)
    epsg = next((int(m.code) for m in matches if m.auth_name == "EPSG" and m.code.isdigit()), None)
    if epsg is not None:
        return epsg, f"EPSG:{epsg}"
    return None, f"{matches[0].auth_name}:{matches[0].code}" if matches else None
