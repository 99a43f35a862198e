"""raster.preview and show(), specified on rasters built here whose pictures are worked out on paper.

Each test's docstring names the mistake it guards against. The PNGs are decoded with Pillow and
compared pixel for pixel. The last tests go through both faces (a classic tool, and execute_code
with show()) with the SDK's in-process client, in both protocol eras.
"""

from __future__ import annotations

import base64
import io
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine
from mcp import Client
from mcp.types import ImageContent
from PIL import Image

from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.sandbox.bindings import ApiError
from llmc_mcp.sandbox.images import MAX_IMAGE_SIDE, MAX_IMAGES, ShownImages
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured, text

PREVIEW = get_operation("raster.preview")
ERAS = ["auto", "legacy"]
RED, BLUE = (255, 0, 0, 255), (0, 0, 255, 255)


def write(
    path: Path,
    data: np.ndarray,
    *,
    nodata: float | None = None,
    colormap: dict[int, tuple[int, int, int, int]] | None = None,
    scale: float | None = None,
    offset: float | None = None,
    block: int = 16,
) -> Path:
    """A GeoTIFF from a (bands, rows, cols) or (rows, cols) array, tiled when both sides allow it."""
    data = data if data.ndim == 3 else data[None]
    count, height, width = data.shape
    profile: dict[str, Any] = {
        "driver": "GTiff", "width": width, "height": height, "count": count, "dtype": data.dtype.name,
        "crs": "EPSG:32618", "transform": Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 4_500_000.0),
        "nodata": nodata,
    }  # fmt: skip
    if width % block == 0 and height % block == 0:
        profile.update(tiled=True, blockxsize=block, blockysize=block)
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(data)
        if colormap is not None:
            ds.write_colormap(1, colormap)
        if scale is not None or offset is not None:
            ds.scales = [scale or 1.0] * count
            ds.offsets = [offset or 0.0] * count
    return path


def preview(ctx: OperationContext, **args: Any) -> tuple[dict[str, Any], Image.Image]:
    """The result as plain data and its PNG decoded."""
    result = PREVIEW.run(ctx, PREVIEW.validate(args)).model_dump(mode="json")
    return result, Image.open(io.BytesIO(base64.b64decode(result["png_base64"])))


def ramp_row() -> np.ndarray:
    """One row of 101 pixels holding 0, 1, ..., 100: its 2nd and 98th percentiles are 2 and 98."""
    return np.arange(101, dtype=np.float32)[None, :]


# --- size ---------------------------------------------------------------------------------------------


def test_the_longest_side_is_max_size_and_the_aspect_is_kept(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a preview squashed to a square, or one over max_size: 320x160 at max_size 100 is
    100x50, and the result says so."""
    write(workspace_dir / "wide.tif", np.arange(160 * 320, dtype=np.float32).reshape(160, 320))
    result, image = preview(ctx, path="wide.tif", max_size=100)
    assert image.size == (100, 50) == (result["width"], result["height"])
    assert (result["source_width"], result["source_height"]) == (320, 160)


def test_a_raster_smaller_than_max_size_is_drawn_at_its_own_size(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against enlarging a small raster to max_size (invented pixels, and a bigger image)."""
    write(workspace_dir / "small.tif", np.ones((20, 30), dtype=np.float32))
    _, image = preview(ctx, path="small.tif", max_size=512)
    assert image.size == (30, 20)


def test_a_big_raster_is_never_read_at_full_resolution(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against reading the whole raster and shrinking it in numpy: a 4096x4096 float32 raster
    (64 MiB of pixels) previewed at 64 pixels must not allocate more than a few MiB of arrays."""
    side = 4096
    with rasterio.open(
        workspace_dir / "big.tif", "w", driver="GTiff", width=side, height=side, count=1, dtype="float32",
        crs="EPSG:32618", transform=Affine(10.0, 0.0, 0.0, 0.0, -10.0, 0.0), tiled=True,
        blockxsize=256, blockysize=256, compress="deflate",
    ) as ds:  # fmt: skip
        row = np.arange(side, dtype=np.float32)[None, :].repeat(256, axis=0)
        for top in range(0, side, 256):
            ds.write(row, 1, window=rasterio.windows.Window(0, top, side, 256))
    tracemalloc.start()
    try:
        _, image = preview(ctx, path="big.tif", max_size=64)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert image.size == (64, 64)
    assert peak < 4 * 1024 * 1024, peak


def test_a_sidecar_overriding_the_georeferencing_does_not_stop_a_preview(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against refusing a picture for a reason that concerns positions only: an .aux.xml that
    moves the grid changes nothing in the PNG of a 0..100 ramp."""
    write(workspace_dir / "moved.tif", ramp_row())
    (workspace_dir / "moved.tif.aux.xml").write_text(
        "<PAMDataset><GeoTransform>600000.0, 20.0, 0.0, 5040000.0, 0.0, -20.0</GeoTransform></PAMDataset>"
    )
    result, image = preview(ctx, path="moved.tif")
    assert image.size == (101, 1) and result["limits"] == [[2.0, 98.0]]


# --- transparency ---------------------------------------------------------------------------------


def test_alpha_is_zero_exactly_where_nodata_is(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against nodata drawn as a colour (black, or the stretch's low end): alpha is 0 on the
    nodata value and NaN cells and 255 on every other cell."""
    data = np.arange(24 * 32, dtype=np.float32).reshape(24, 32)
    nodata = np.zeros(data.shape, dtype=bool)
    nodata[3:9, 5:20] = True
    nodata[np.arange(24), np.arange(24)] = True
    data[nodata] = -9999.0
    data[20, 30] = np.nan
    nodata[20, 30] = True
    write(workspace_dir / "holes.tif", data, nodata=-9999.0)
    result, image = preview(ctx, path="holes.tif")
    alpha = np.asarray(image.convert("RGBA"))[..., 3]
    assert np.array_equal(alpha == 0, nodata)
    assert set(np.unique(alpha)) == {0, 255}
    assert result["transparent_pixels"] == int(nodata.sum())


def test_decimated_class_codes_stay_transparent_where_all_nodata(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a decimated read that lets nodata bleed into valid pixels or the reverse: the
    left half of a 64x64 class raster is nodata, so the left half of its 16x16 preview is transparent."""
    data = np.full((64, 64), 3, dtype=np.uint8)
    data[:, :32] = 0
    data[:, 48:] = 7
    write(workspace_dir / "classes.tif", data, nodata=0)
    result, image = preview(ctx, path="classes.tif", max_size=16)
    alpha = np.asarray(image.convert("RGBA"))[..., 3]
    expected = np.zeros((16, 16), dtype=bool)
    expected[:, :8] = True
    assert result["resampling"] == "nearest"
    assert np.array_equal(alpha == 0, expected)


# --- colour tables and classes ----------------------------------------------------------------------


def test_a_downsampled_colour_table_checkerboard_keeps_its_two_exact_colours(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against smoothing classes: averaging a red/blue checkerboard makes purple, a colour no
    class has. Squares of 8 pixels drawn at a quarter size stay red and blue, half each."""
    rows, cols = np.indices((256, 256))
    board = (((rows // 8) + (cols // 8)) % 2).astype(np.uint8)
    write(workspace_dir / "board.tif", board, colormap={0: RED, 1: BLUE})
    result, image = preview(ctx, path="board.tif", max_size=64)
    pixels = np.asarray(image.convert("RGBA")).reshape(-1, 4)
    colours, counts = np.unique(pixels, axis=0, return_counts=True)
    assert [tuple(c) for c in colours.tolist()] == [BLUE, RED]
    assert counts.tolist() == [64 * 64 // 2] * 2
    assert (result["rendering"], result["stretch"], result["limits"]) == ("colour_table", None, None)
    assert result["resampling"] == "nearest"


# --- stretches ---------------------------------------------------------------------------------------


def test_percentile_stretch_maps_the_2nd_and_98th_percentiles_to_0_and_255(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a stretch over min-max or over the wrong percentiles: on 0..100 the limits are
    2 and 98, so level(v) = round(255 (v - 2) / 96): 34 -> 85, 66 -> 170, and 0 and 100 clip."""
    write(workspace_dir / "ramp.tif", ramp_row())
    result, image = preview(ctx, path="ramp.tif")
    levels = np.asarray(image)[0]
    assert result["limits"] == [[2.0, 98.0]] and result["stretch"] == "percentile"
    assert [int(levels[v]) for v in (0, 2, 34, 66, 98, 100)] == [0, 0, 85, 170, 255, 255]


def test_minmax_stretch_maps_min_and_max_to_0_and_255(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against minmax silently doing a percentile stretch: 0..100 maps 20 to 51 and 100 to 255."""
    write(workspace_dir / "ramp.tif", ramp_row())
    result, image = preview(ctx, path="ramp.tif", stretch="minmax")
    levels = np.asarray(image)[0]
    assert result["limits"] == [[0.0, 100.0]]
    assert [int(levels[v]) for v in (0, 20, 100)] == [0, 51, 255]


def test_limits_are_physical_and_a_positive_scale_draws_the_same_picture(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against limits in stored units the agent would read as physical ones: stored 0..100 with
    scale 0.5 and offset 10 has physical percentiles 11 and 59, and the same levels as unscaled."""
    write(workspace_dir / "plain.tif", ramp_row().astype(np.uint8))
    write(workspace_dir / "scaled.tif", ramp_row().astype(np.uint8), scale=0.5, offset=10.0)
    plain, plain_image = preview(ctx, path="plain.tif")
    scaled, scaled_image = preview(ctx, path="scaled.tif")
    assert scaled["limits"] == [[11.0, 59.0]] and plain["limits"] == [[2.0, 98.0]]
    assert np.array_equal(np.asarray(plain_image), np.asarray(scaled_image))


def test_stretch_none_draws_uint8_as_stored(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against 'none' stretching anyway: stored 0..100 stay levels 0..100."""
    write(workspace_dir / "bytes.tif", ramp_row().astype(np.uint8))
    result, image = preview(ctx, path="bytes.tif", stretch="none")
    assert np.asarray(image)[0].tolist() == list(range(101)) and result["limits"] == [[0.0, 255.0]]


def test_stretch_none_refuses_bands_that_are_not_uint8(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against clipping float values into 0..255 silently under 'none'."""
    write(workspace_dir / "ramp.tif", ramp_row())
    with pytest.raises(InvalidArgument, match=r"stretch 'none'.*float32"):
        preview(ctx, path="ramp.tif", stretch="none")


def test_continuous_data_is_averaged_over_valid_pixels(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against nearest decimation of measurements (one pixel standing for sixteen) and against
    nodata taking part in the average: at a quarter size, 4x4 blocks of fifteen 0s and one 160 average
    to 10, and blocks of 100s with a nodata cell to 100: the minmax limits."""
    data = np.full((16, 64), 100.0, dtype=np.float32)
    data[:, :4] = 0.0
    data[::4, 0] = 160.0
    data[0, 60] = -1.0
    write(workspace_dir / "avg.tif", data, nodata=-1.0)
    result, image = preview(ctx, path="avg.tif", max_size=16, stretch="minmax")
    assert image.size == (16, 4) and result["resampling"] == "average"
    assert result["limits"] == [[10.0, 100.0]] and result["transparent_pixels"] == 0


# --- bands -------------------------------------------------------------------------------------------


def test_default_bands_follow_the_colour_interpretation(ctx: OperationContext) -> None:
    """Guards against drawing a BGRA file's bands 1,2,3 as red, green, blue (a blue-tinted picture):
    RGBA.uint16.tif stores blue, green, red, alpha, so red is band 3; its alpha band makes the
    corners transparent."""
    result, image = preview(ctx, path="RGBA.uint16.tif", max_size=128)
    assert result["bands"] == [3, 2, 1] and result["rendering"] == "rgb"
    assert image.mode == "RGBA" and result["transparent_pixels"] > 0


def test_bands_must_be_one_or_three(ctx: OperationContext) -> None:
    """Guards against guessing what two bands should look like."""
    with pytest.raises(InvalidArgument, match="1 \\(grey\\) or 3"):
        preview(ctx, path="RGB.byte.tif", bands=[1, 2])


def test_max_size_is_bounded(ctx: OperationContext) -> None:
    """Guards against a preview as large as the raster: max_size stops at 2048."""
    with pytest.raises(InvalidArgument, match="max_size"):
        preview(ctx, path="RGB.byte.tif", max_size=4096)


# --- show() in the sandbox ----------------------------------------------------------------------------


def png(width: int, height: int) -> str:
    buffer = io.BytesIO()
    Image.new("L", (width, height)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def test_show_refuses_an_image_wider_than_the_limit() -> None:
    """Guards against a forged PNG string of any size reaching the host."""
    show = ShownImages().function()
    with pytest.raises(ApiError, match=f"at most {MAX_IMAGE_SIDE} a side"):
        show(png(MAX_IMAGE_SIDE + 1, 1))


def test_show_refuses_what_is_not_a_png() -> None:
    """Guards against attaching text or another format labelled image/png."""
    show = ShownImages().function()
    with pytest.raises(ApiError, match="not a PNG"):
        show(base64.b64encode(b"GIF89a" + bytes(40)).decode("ascii"))
    with pytest.raises(ApiError, match="not valid base64"):
        show("not base64!")


def test_show_attaches_none_of_a_call_that_goes_past_the_count() -> None:
    """Guards against a partial attach: a call past the bound adds nothing, the earlier ones stay."""
    shown = ShownImages()
    show = shown.function()
    show(png(2, 2), png(3, 3))
    with pytest.raises(ApiError, match=f"at most {MAX_IMAGES} images"):
        show(png(4, 4), png(5, 5), png(6, 6))
    assert [(i["width"], i["height"]) for i in shown.take()] == [(2, 2), (3, 3)]


# --- through the faces ---------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_the_classic_tool_returns_the_png_as_image_content(
    classic_settings: Settings, era: str
) -> None:
    """Guards against base64 pasted into the text a model reads: the PNG comes as one image content
    (image/png, decoding at the result's size) and the JSON holds a note in its place."""
    async with Client(build_server(classic_settings), mode=era) as client:
        result = await client.call_tool("raster_preview", {"path": "RGB.byte.tif", "max_size": 64})
    assert not result.is_error
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    data = structured(result)
    decoded = Image.open(io.BytesIO(base64.b64decode(images[0].data)))
    assert decoded.size == (data["width"], data["height"]) == (64, 58)
    assert "iVBORw0KGgo" not in text(result) and "image content 1" in data["png_base64"]


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_show_in_execute_code_attaches_images_not_text(code_settings: Settings, era: str) -> None:
    """Guards against show() pasting base64 into the text, or losing images on the way out of the
    worker: two show() calls make two image contents; a printed preview is cut out of the text."""
    code = (
        'p = raster.preview("RGB.byte.tif", max_size=64)\n'
        'show(p)\nshow(p["png_base64"])\nprint(p)\n{"size": [p["width"], p["height"]]}'
    )
    async with Client(build_server(code_settings), mode=era) as client:
        result = await client.call_tool("execute_code", {"code": code})
    data = structured(result)
    assert data["ok"], data
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert len(images) == 2 and all(i.mime_type == "image/png" for i in images)
    assert Image.open(io.BytesIO(base64.b64decode(images[0].data))).size == (64, 58)
    assert [(i["width"], i["height"]) for i in data["images"]] == [(64, 58), (64, 58)]
    assert "data" not in data["images"][0]
    assert "iVBORw0KGgo" not in text(result) and "iVBORw0KGgo" not in str(data)
    assert "left out of the text" in data["stdout"] and data["result"] == {"size": [64, 58]}


@pytest.mark.anyio
async def test_show_past_the_bound_fails_the_call_with_a_clear_error(code_settings: Settings) -> None:
    """Guards against a cell attaching images without bound: the fifth image fails the call with an
    invalid_argument that says the limit, and the four shown before it are still attached."""
    code = 'p = raster.preview("RGB.byte.tif", max_size=32)\nshow(p, p, p, p)\nshow(p)'
    async with Client(build_server(code_settings), mode="legacy") as client:
        result = await client.call_tool("execute_code", {"code": code})
    data = structured(result)
    assert result.is_error and data["error"]["type"] == "invalid_argument"
    assert f"at most {MAX_IMAGES} images per execute_code call" in data["error"]["message"]
    assert data["error"]["line"] == 3
    assert len([b for b in result.content if isinstance(b, ImageContent)]) == MAX_IMAGES
