"""Checks of a raster's geotransform made before rows and columns are taken as map directions.

Cell areas (raster.area), the 3x3 gradient (terrain), D8 neighbours (hydrology), polygon coverage
(zonal statistics), a mosaic's lattice (raster.merge) and a box's cell rectangle (raster.clip) all
assume rows run east-west and columns north-south. The namespaces do not import each other
(DD-MCP-081), so the test they share lives here, below them.
"""

from __future__ import annotations

from affine import Affine

from llmc_mcp.errors import InvalidArgument


def is_rotated(transform: Affine) -> bool:
    """Whether the geotransform rotates or shears the grid (b or d non-zero), so that its rows and
    columns are not east-west and north-south. A south-up or mirrored grid is not rotated."""
    return transform.b != 0 or transform.d != 0


def check_north_up(transform: Affine, shown: str, why: str, fix: str) -> None:
    """Refuse a rotated or sheared grid, naming its b and d so the agent sees what is off.

    ``why`` follows the geotransform in the message, with its own leading ';' or ':', and says what
    the operation needs of rows and columns; ``fix`` says how to get a north-up copy for it.
    """
    if is_rotated(transform):
        raise InvalidArgument(
            f"'{shown}' has a rotated or sheared grid (geotransform b={transform.b:g}, "
            f"d={transform.d:g}){why}",
            fix=fix,
        )


def check_cell_size(transform: Affine, shown: str) -> None:
    """Refuse a geotransform whose cells have no width or no height: nothing could be measured on them."""
    if transform.a == 0 or transform.e == 0:
        raise InvalidArgument(
            f"'{shown}' has a zero cell size in its geotransform.", fix="Fix its georeferencing."
        )
