from typing import Literal, TypedDict
CalcDtype = Literal['float32', 'float64', 'uint8', 'uint16', 'int16', 'uint32', 'int32']
class CalcInput(TypedDict):
    name: str
    path: str
    band: int
class CalcInputUsed(TypedDict):
    name: str  # The expression's name for this band
    path: str
    band: int
    dtype: str  # The band's stored data type
    nodata: float | None  # The band's nodata value (NaN possible)
    scale: float  # The band's declared scale (1 when none is declared)
    offset: float  # The band's declared offset (0 when none is declared)
    applied: bool
class Histogram(TypedDict):
    edges: list[float]
    counts: list[int]
class RawStats(TypedDict):
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    percentiles: dict[str, float]
class BandStats(TypedDict):
    band: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None  # Population standard deviation of valid values (ddof=0)
    valid_count: int
    nodata_count: int
    percentiles: dict[str, float]  # Requested percentiles keyed like 'p50' or 'p2.5'
    histogram: Histogram | None
    scale: float  # The band's declared scale (1 when none)
    offset: float  # The band's declared offset (0 when none)
    raw: RawStats | None
class CalcStatsResult(TypedDict):
    expression: str
    physical: bool  # True when each input's scale and offset were applied first
    inputs: list[CalcInputUsed]
    dtype: str
    stats: BandStats
    method: str
    note: str
def calc_stats(
    expression: str,  # Band math over the input names, e.g. '(nir - red) / (nir + red)': numbers, + - * / ** %, comparisons, & | ~, where(cond, a, b) and element-wise math functions (sqrt, log, ...).
    inputs: list[CalcInput],  # The expression's names: [{'name': 'nir', 'path': 's2.tif', 'band': 8}, ...] (band defaults to 1). A mapping {'nir': {'path': 's2.tif', 'band': 8}, ...} is accepted too.
    dtype: CalcDtype = 'float32',  # Type the values are cast to before they are counted, as raster.calc writes them.
    nodata: float | None = None,  # Nodata value as raster.calc's; default NaN for floats. Integer types need one.
    physical: bool = True,  # Apply each band's declared scale and offset (raw * scale + offset) before the expression, so it sees physical values (reflectance, kelvin); False uses stored values.
    percentiles: list[float] = [2.0, 25.0, 50.0, 75.0, 98.0],  # Percentiles to compute, each in [0, 100]; [] for none.
    histogram_bins: int | None = None,  # Also count valid values in this many equal bins over [min, max] (1-10000).
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> CalcStatsResult:
    """Statistics of a band-math expression without writing it: raster.calc then raster.stats in one call.
    Errors (ApiError, by e.type): as raster.calc's (expression, inputs, dtype, nodata, grids) and raster.stats' (percentiles, histogram_bins).
    """
    ...
