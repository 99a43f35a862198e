from typing import Literal, TypedDict
Stretch = Literal['percentile', 'minmax', 'none']
class RasterPreview(TypedDict):
    path: str
    width: int  # PNG width in pixels (at most max_size)
    height: int  # PNG height in pixels (at most max_size)
    source_width: int
    source_height: int
    bands: list[int]
    rendering: Literal['grey', 'rgb', 'colour_table']  # 'grey' or 'rgb' (stretched bands)
    stretch: Stretch | None
    limits: list[tuple[float, float]] | None
    resampling: Literal['nearest', 'average']
    transparent_pixels: int
    png_bytes: int
    png_base64: str
    note: str
def preview(
    path: str,  # Workspace-relative raster file.
    bands: list[int] | None = None,  # One band (grey, or its colour table) or three (red, green, blue); default: the red/green/blue bands by colour interpretation, else 1,2,3, or band 1 of a 1-2 band raster.
    max_size: int = 512,  # Longest side of the PNG in pixels (16-2048).
    stretch: Stretch = 'percentile',  # 'percentile': 2nd-98th percentile of valid pixels per band to 0-255; 'minmax': min-max per band; 'none': uint8 values as stored.
) -> RasterPreview:
    """A PNG quicklook of a raster to look at: nodata transparent, classes unsmoothed.
    Errors (ApiError, by e.type): not_found if the file does not exist; invalid_argument for bands that are not 1 or 3 valid band numbers, or stretch 'none' on bands that are not uint8; raster_error if the pixels cannot be read.
    """
    ...
