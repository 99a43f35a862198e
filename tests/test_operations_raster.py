"""raster.info / stats / reproject / convert, checked against independent rasterio, numpy and pyproj results.

Fixtures (from conftest): ``workspace_dir`` holds copies of the shared rasters, ``ctx`` is an
OperationContext on it. Operations are called the way every face calls them: validate, then run.
"""

from __future__ import annotations

import json
import math
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pyproj.network
import pytest
import rasterio
import rasterio.env
from affine import Affine
from pydantic import BaseModel
from pyproj import CRS
from rasterio.enums import ColorInterp
from rasterio.warp import Resampling, calculate_default_transform
from rasterio.warp import reproject as warp_in_memory
from rio_cogeo.cogeo import cog_validate

from llmc_mcp.errors import CrsError, InvalidArgument, NotFound, RasterError
from llmc_mcp.gdal.environment import READ_DRIVERS, disable_network, gdal_env
from llmc_mcp.operations import raster
from llmc_mcp.operations.catalog import Operation, OperationContext
from tests.conftest import SHARED_FILES


def north_up(west: float, north: float, pixel: float) -> Affine:
    return Affine(pixel, 0.0, west, 0.0, -pixel, north)


UTM_GRID = north_up(500_000, 4_500_000, 30)


def call(op: Operation, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def write_raster(
    path: Path,
    data: np.ndarray,
    *,
    crs: str | None = "EPSG:32618",
    transform: Affine = UTM_GRID,
    nodata: float | None = None,
    **extra: Any,
) -> Path:
    """A tiled GeoTIFF from a (bands, rows, cols) array: the fixtures the shared data lacks."""
    count, height, width = data.shape
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=width,
        height=height,
        count=count,
        dtype=data.dtype.name,
        crs=crs,
        transform=transform,
        nodata=nodata,
        tiled=True,
        blockxsize=256,
        blockysize=256,
        **extra,
    ) as ds:
        ds.write(data)
    return path


def refused(op: Operation, ctx: OperationContext, match: str, **args: Any) -> InvalidArgument:
    """Refused both by the preflight (before any justification is asked for) and by the run itself."""
    validated = op.validate(args)
    with pytest.raises(InvalidArgument, match=match):
        op.check(ctx, validated)
    with pytest.raises(InvalidArgument, match=match) as caught:
        op.run(ctx, validated)
    return caught.value


def valid_values(path: Path, band: int) -> np.ndarray:
    """Independent answer: the band read whole with rasterio's mask, NaN dropped."""
    with rasterio.open(path) as ds:
        arr = ds.read(band, masked=True)
    values = arr.compressed()
    return values[np.isfinite(values)] if values.dtype.kind == "f" else values


def partial_files(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob("*") if ".partial-" in p.name]


# ------------------------------------------------------------------------------------------ gdal env


def test_gdal_env_switches_off_network_vrt_python_and_mem_datasets(ctx: OperationContext):
    with gdal_env(ctx):
        options = rasterio.env.getenv()
    assert options["GDAL_VRT_ENABLE_PYTHON"] == "NO"
    assert options["GDAL_MEM_ENABLE_OPEN"] == "NO"
    assert options["AWS_NO_SIGN_REQUEST"] == "YES"
    assert options["GDAL_NUM_THREADS"] == str(ctx.num_threads)
    assert not options["CPL_VSIL_CURL_ALLOWED_EXTENSIONS"].endswith((".tif", ".tiff", "{noext}"))


def test_read_drivers_are_file_formats_only():
    assert "GTiff" in READ_DRIVERS
    assert not {"VRT", "MEM", "WMS", "WMTS", "WCS", "HTTP", "DAAS", "EEDAI"} & set(READ_DRIVERS)


def test_disable_network_turns_proj_and_gdal_network_off():
    disable_network()
    assert not pyproj.network.is_network_enabled()
    assert rasterio.env.get_gdal_config("CPL_VSIL_CURL_ALLOWED_EXTENSIONS", normalize=False) == (
        ".llmc-network-disabled"
    )


# ---------------------------------------------------------------------------------------------- info


@pytest.mark.parametrize("name", SHARED_FILES)
def test_info_describes_every_shared_file_like_rasterio(
    ctx: OperationContext, workspace_dir: Path, name: str
):
    result = call(raster.info, ctx, path=name)
    with rasterio.open(workspace_dir / name) as ds:
        assert (result.width, result.height, result.count) == (ds.width, ds.height, ds.count)
        assert result.dtypes == list(ds.dtypes)
        assert result.transform == tuple(ds.transform)[:6]
        assert result.overviews == [ds.overviews(i) for i in ds.indexes]
    assert result.path == name
    assert result.file_size_bytes == (workspace_dir / name).stat().st_size
    assert str(workspace_dir) not in result.model_dump_json()


def test_info_reports_epsg_nodata_and_colour_of_rgb_byte(ctx: OperationContext):
    result = call(raster.info, ctx, path="RGB.byte.tif")
    assert result.crs.epsg == 32618
    assert result.crs.name == CRS.from_epsg(32618).name
    assert result.crs.wkt is None
    assert result.nodata == [0.0, 0.0, 0.0]
    assert result.colorinterp == ["red", "green", "blue"]
    assert result.bounds.model_dump() == {
        "left": 101985.0,
        "bottom": 2611485.0,
        "right": 339315.0,
        "top": 2826915.0,
    }


def test_info_goes_has_a_custom_crs_without_epsg(ctx: OperationContext):
    result = call(raster.info, ctx, path="goes.tif", include_wkt=True)
    assert result.crs.epsg is None
    parsed = CRS.from_wkt(result.crs.wkt)
    assert parsed.coordinate_operation.method_name.startswith("Geostationary Satellite")
    assert result.mask_flags[0] == ["per_dataset"]


def test_info_float_nan_nodata_is_nan_and_serializes_as_a_string(ctx: OperationContext):
    result = call(raster.info, ctx, path="float_nan.tif")
    assert math.isnan(result.nodata[0])
    assert result.crs is None
    assert json.loads(result.model_dump_json())["nodata"] == ["NaN"]


def test_info_rotated_grid_keeps_its_rotation_and_bounds_envelope_the_corners(ctx: OperationContext):
    result = call(raster.info, ctx, path="rotated.tif")
    a, b, c, d, e, f = result.transform
    assert b != 0 and d != 0
    corners = [Affine(a, b, c, d, e, f) @ xy for xy in ((0, 0), (10, 0), (0, 15), (10, 15))]
    assert result.bounds.left == pytest.approx(min(x for x, _ in corners))
    assert result.bounds.right == pytest.approx(max(x for x, _ in corners))
    assert result.bounds.bottom == pytest.approx(min(y for _, y in corners))
    assert result.bounds.top == pytest.approx(max(y for _, y in corners))


def test_info_caps_tags_at_50_keys_and_500_characters(ctx: OperationContext, workspace_dir: Path):
    path = write_raster(workspace_dir / "tagged.tif", np.zeros((1, 8, 8), np.uint8))
    with rasterio.open(path, "r+") as ds:
        ds.update_tags(**{f"K{i:02d}": "x" * 1000 for i in range(60)})
    result = call(raster.info, ctx, path="tagged.tif")
    assert len(result.tags) <= 50
    assert result.tags_truncated
    assert all(len(v) <= 500 for v in result.tags.values())


def test_info_missing_file_is_not_found(ctx: OperationContext):
    with pytest.raises(NotFound, match=r"nope\.tif"):
        call(raster.info, ctx, path="nope.tif")


def test_info_on_a_text_file_names_the_relative_file(ctx: OperationContext, workspace_dir: Path):
    (workspace_dir / "notes.txt").write_text("not a raster")
    with pytest.raises(RasterError) as caught:
        call(raster.info, ctx, path="notes.txt")
    assert "'notes.txt' is not a raster GDAL can read" in caught.value.message
    assert str(workspace_dir) not in str(caught.value)


def test_info_refuses_vrt_files_which_could_reference_anything(ctx: OperationContext, workspace_dir: Path):
    with rasterio.open(workspace_dir / "RGB.byte.tif") as ds:
        size = (ds.width, ds.height)
    (workspace_dir / "x.tif").write_text(
        f'<VRTDataset rasterXSize="{size[0]}" rasterYSize="{size[1]}">'
        '<VRTRasterBand dataType="Byte" band="1">'
        f'<SimpleSource><SourceFilename relativeToVRT="1">RGB.byte.tif</SourceFilename>'
        f"<SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></VRTDataset>"
    )
    with pytest.raises(RasterError, match="not a raster GDAL can read"):
        call(raster.info, ctx, path="x.tif")


# --------------------------------------------------------------------------------------------- stats


def test_stats_of_rgb_byte_equal_numpy_with_exact_percentiles(ctx: OperationContext, workspace_dir: Path):
    percentiles = [0, 2, 25, 50, 75, 98, 100, 33.3]
    result = call(raster.stats, ctx, path="RGB.byte.tif", percentiles=percentiles)
    assert not result.approx
    for band in result.bands:
        values = valid_values(workspace_dir / "RGB.byte.tif", band.band)
        assert band.valid_count == values.size
        assert band.nodata_count == 791 * 718 - values.size
        assert (band.min, band.max) == (values.min(), values.max())
        assert band.mean == pytest.approx(values.mean(dtype=np.float64), rel=1e-12)
        assert band.std == pytest.approx(values.std(dtype=np.float64), rel=1e-12)
        for p in percentiles:
            assert band.percentiles[f"p{p:g}"] == np.percentile(values, p)


def test_stats_histogram_equals_numpy_over_min_max(ctx: OperationContext, workspace_dir: Path):
    result = call(raster.stats, ctx, path="RGB.byte.tif", bands=[2], histogram_bins=16)
    values = valid_values(workspace_dir / "RGB.byte.tif", 2)
    counts, edges = np.histogram(values, bins=16, range=(values.min(), values.max()))
    assert result.bands[0].histogram.counts == counts.tolist()
    assert result.bands[0].histogram.edges == pytest.approx(edges.tolist())


def test_stats_count_nan_as_nodata(ctx: OperationContext, workspace_dir: Path):
    band = call(raster.stats, ctx, path="float_nan.tif").bands[0]
    with rasterio.open(workspace_dir / "float_nan.tif") as ds:
        raw = ds.read(1)
    assert band.valid_count == np.isfinite(raw).sum() == 5
    assert band.nodata_count == 1
    assert band.mean == pytest.approx(float(np.nanmean(raw.astype(np.float64))), rel=1e-9)


def test_stats_exclude_both_the_nodata_value_and_nan(ctx: OperationContext, workspace_dir: Path):
    data = np.arange(100, dtype=np.float32).reshape(1, 10, 10)
    data[0, 0, :5] = -9999
    data[0, 1, :3] = np.nan
    write_raster(workspace_dir / "holes.tif", data, nodata=-9999)
    band = call(raster.stats, ctx, path="holes.tif").bands[0]
    assert (band.valid_count, band.nodata_count) == (92, 8)
    assert band.min == 5.0  # row 0 starts with 5 nodata pixels; the NaN are 10, 11, 12


def test_stats_float_percentiles_are_within_one_fine_bin_of_numpy(ctx: OperationContext, workspace_dir: Path):
    rng = np.random.default_rng(7)
    data = rng.normal(100, 15, size=(1, 300, 400)).astype(np.float32)
    data[0, rng.random((300, 400)) < 0.05] = np.nan
    write_raster(workspace_dir / "normal.tif", data)
    percentiles = [1, 10, 50, 90, 99]
    band = call(raster.stats, ctx, path="normal.tif", percentiles=percentiles, histogram_bins=50).bands[0]
    values = valid_values(workspace_dir / "normal.tif", 1).astype(np.float64)
    tolerance = (values.max() - values.min()) / 2**16
    for p in percentiles:
        assert abs(band.percentiles[f"p{p}"] - np.percentile(values, p)) <= tolerance
    assert band.mean == pytest.approx(values.mean(), rel=1e-9)
    assert band.std == pytest.approx(values.std(), rel=1e-9)
    assert band.histogram.counts == np.histogram(values, 50, range=(values.min(), values.max()))[0].tolist()
    result = call(raster.stats, ctx, path="normal.tif")
    assert "65536-bin histogram" in result.method


def test_stats_int16_with_negative_values_have_exact_percentiles(ctx: OperationContext, workspace_dir: Path):
    data = np.random.default_rng(1).integers(-3000, 3000, size=(1, 200, 300), dtype=np.int16)
    write_raster(workspace_dir / "dem.tif", data, nodata=-32768)
    band = call(raster.stats, ctx, path="dem.tif", percentiles=[5, 50, 95]).bands[0]
    values = data.ravel()
    assert (band.min, band.max) == (values.min(), values.max())
    assert band.percentiles == {f"p{p}": np.percentile(values, p) for p in (5, 50, 95)}


def test_stats_int32_with_a_small_range_count_exactly_in_a_second_pass(
    ctx: OperationContext, workspace_dir: Path
):
    data = np.random.default_rng(2).integers(100_000, 101_000, size=(1, 100, 100), dtype=np.int32)
    write_raster(workspace_dir / "classes.tif", data)
    result = call(raster.stats, ctx, path="classes.tif", percentiles=[10, 50, 90])
    assert result.bands[0].percentiles == {f"p{p}": np.percentile(data.ravel(), p) for p in (10, 50, 90)}
    assert "exact, from value counts in a second pass" in result.method


def test_stats_use_the_internal_mask(ctx: OperationContext, workspace_dir: Path):
    band = call(raster.stats, ctx, path="goes.tif", bands=[1]).bands[0]
    with rasterio.open(workspace_dir / "goes.tif") as ds:
        valid = int((ds.dataset_mask() > 0).sum())
    assert band.valid_count == valid
    assert band.nodata_count == 542 * 542 - valid


def test_stats_of_a_band_with_no_valid_pixel_are_empty(ctx: OperationContext, workspace_dir: Path):
    write_raster(workspace_dir / "empty.tif", np.full((1, 20, 20), 255, np.uint8), nodata=255)
    band = call(raster.stats, ctx, path="empty.tif", histogram_bins=4).bands[0]
    assert (band.valid_count, band.nodata_count) == (0, 400)
    assert band.min is None and band.mean is None and band.percentiles == {}


def test_stats_report_requested_bands_in_request_order(ctx: OperationContext):
    result = call(raster.stats, ctx, path="RGB.byte.tif", bands=[3, 1], percentiles=[])
    assert [b.band for b in result.bands] == [3, 1]
    assert all(b.percentiles == {} for b in result.bands)


def test_stats_memory_does_not_grow_with_raster_size(ctx: OperationContext, workspace_dir: Path):
    size = 4096
    path = workspace_dir / "big.tif"
    profile = dict(driver="GTiff", width=size, height=size, count=1, dtype="float32", crs="EPSG:32618")
    profile.update(transform=north_up(0, size, 1), tiled=True, blockxsize=512, blockysize=512)
    rng = np.random.default_rng(3)
    total, total_sq = 0.0, 0.0
    with rasterio.open(path, "w", **profile) as ds:
        for row in range(0, size, 512):
            block = rng.random((512, size), dtype=np.float32) * 1000
            ds.write(block, 1, window=((row, row + 512), (0, size)))
            total += float(block.sum(dtype=np.float64))
            total_sq += float((block.astype(np.float64) ** 2).sum())
    tracemalloc.start()
    try:
        result = call(raster.stats, ctx, path="big.tif", histogram_bins=100)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    raw_size = size * size * 4  # 64 MiB as float32, 128 MiB as float64
    assert peak < 40 * 2**20 < raw_size
    band = result.bands[0]
    n = size * size
    assert band.valid_count == n
    assert band.mean == pytest.approx(total / n, rel=1e-9)
    assert band.std == pytest.approx(math.sqrt(total_sq / n - (total / n) ** 2), rel=1e-6)
    assert "16 window(s)" in result.method


def test_stats_approx_reads_a_decimated_sample_and_says_so(ctx: OperationContext, workspace_dir: Path):
    approx = call(raster.stats, ctx, path="world.byte.tif", approx=True)
    exact = call(raster.stats, ctx, path="world.byte.tif")
    assert approx.approx and not exact.approx
    assert approx.method.startswith("Approximate")
    assert approx.bands[0].valid_count + approx.bands[0].nodata_count <= 2**20
    assert approx.bands[0].mean == pytest.approx(exact.bands[0].mean, abs=0.02)


def test_stats_approx_on_a_small_raster_is_exact_and_says_so(ctx: OperationContext):
    result = call(raster.stats, ctx, path="RGB.byte.tif", approx=True)
    assert not result.approx
    assert "Exact" in result.method


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"bands": [4]}, r"bands \[4\] do not exist"),
        ({"bands": [0]}, r"bands \[0\] do not exist"),
        ({"bands": []}, "empty"),
        ({"bands": [1, 1]}, "twice"),
        ({"percentiles": [50, 101]}, r"outside \[0, 100\]"),
        ({"percentiles": [-1]}, r"outside \[0, 100\]"),
        ({"histogram_bins": 0}, "outside 1..10000"),
        ({"histogram_bins": 10_001}, "outside 1..10000"),
    ],
)
def test_stats_reject_invalid_arguments_with_a_fix(ctx: OperationContext, args: dict[str, Any], match: str):
    with pytest.raises(InvalidArgument, match=match) as caught:
        call(raster.stats, ctx, path="RGB.byte.tif", **args)
    assert caught.value.fix


def test_stats_of_corrupt_pixels_fail_with_a_clear_error(ctx: OperationContext, workspace_dir: Path):
    with pytest.raises(RasterError) as caught:
        call(raster.stats, ctx, path="corrupt.tif")
    assert "'corrupt.tif': the pixel data of band 1 could not be read" in caught.value.message
    assert str(workspace_dir) not in str(caught.value)


# ----------------------------------------------------------------------------------------- reproject


def test_reproject_rgb_byte_to_4326_matches_an_in_memory_warp(ctx: OperationContext, workspace_dir: Path):
    result = call(raster.reproject, ctx, src="RGB.byte.tif", dst="out/rgb_4326.tif", dst_crs="EPSG:4326")
    assert result.path == "out/rgb_4326.tif"
    assert result.crs.epsg == 4326
    with rasterio.open(workspace_dir / "RGB.byte.tif") as src:
        expected_transform, width, height = calculate_default_transform(
            src.crs, "EPSG:4326", src.width, src.height, *src.bounds
        )
        source = src.read()
        src_crs, src_transform = src.crs, src.transform
    assert (result.width, result.height) == (width, height)
    assert result.transform == pytest.approx(tuple(expected_transform)[:6])
    with rasterio.open(workspace_dir / "out/rgb_4326.tif") as out:
        written = out.read()
        expected = np.zeros_like(written)
        warp_in_memory(
            source,
            expected,
            src_transform=src_transform,
            src_crs=src_crs,
            dst_transform=out.transform,
            dst_crs=out.crs,
            src_nodata=0,
            dst_nodata=0,
            resampling=Resampling.nearest,
        )
    assert (written == expected).mean() >= 0.99


def test_reproject_marks_area_outside_the_footprint_as_nodata(ctx: OperationContext, workspace_dir: Path):
    result = call(raster.reproject, ctx, src="RGB.byte.tif", dst="rgb.tif", dst_crs="EPSG:4326")
    assert result.nodata == [0.0, 0.0, 0.0]
    with rasterio.open(workspace_dir / "rgb.tif") as out:
        mask = out.dataset_mask()
    assert mask[0, 0] == mask[0, -1] == mask[-1, 0] == mask[-1, -1] == 0
    assert mask[mask.shape[0] // 2, mask.shape[1] // 2] == 255


def test_reproject_integer_source_without_nodata_gets_an_internal_mask(
    ctx: OperationContext, workspace_dir: Path
):
    data = np.random.default_rng(4).integers(0, 256, size=(1, 200, 200), dtype=np.uint8)
    # Far from the UTM central meridian the grid turns in EPSG:3857, leaving empty output corners.
    write_raster(workspace_dir / "nonodata.tif", data, transform=north_up(200_000, 4_500_000, 30))
    result = call(raster.reproject, ctx, src="nonodata.tif", dst="masked.tif", dst_crs="EPSG:3857")
    assert result.nodata == [None]
    assert result.mask_flags == [["per_dataset"]]
    with rasterio.open(workspace_dir / "masked.tif") as out:
        mask = out.dataset_mask()
    assert 0 < (mask == 0).sum() < mask.size  # rotated footprint: corners empty, middle valid
    assert mask[mask.shape[0] // 2, mask.shape[1] // 2] == 255


def test_reproject_float_source_without_nodata_fills_outside_with_nan(
    ctx: OperationContext, workspace_dir: Path
):
    data = np.random.default_rng(5).random((1, 100, 100)).astype(np.float32)
    write_raster(workspace_dir / "float.tif", data, transform=north_up(200_000, 4_500_000, 30))
    result = call(raster.reproject, ctx, src="float.tif", dst="float_3857.tif", dst_crs="EPSG:3857")
    assert math.isnan(result.nodata[0])
    with rasterio.open(workspace_dir / "float_3857.tif") as out:
        written = out.read(1)
    assert np.isnan(written[0, 0])
    assert np.isfinite(written).any()


def test_reproject_alpha_band_carries_validity(ctx: OperationContext, workspace_dir: Path):
    result = call(raster.reproject, ctx, src="RGBA.uint16.tif", dst="rgba.tif", dst_crs="EPSG:4326")
    assert result.colorinterp == ["blue", "green", "red", "alpha"]
    with rasterio.open(workspace_dir / "rgba.tif") as out:
        alpha = out.read(4)
    assert alpha[0, 0] == 0 and alpha.max() > 0


def test_reproject_carries_descriptions_colorinterp_and_tags(ctx: OperationContext, workspace_dir: Path):
    data = np.ones((2, 64, 64), np.uint16)
    path = write_raster(workspace_dir / "described.tif", data, nodata=0)
    with rasterio.open(path, "r+") as ds:
        ds.set_band_description(1, "nir")
        ds.set_band_description(2, "swir")
        ds.colorinterp = [ColorInterp.gray, ColorInterp.undefined]
        ds.update_tags(SENSOR="test")
    result = call(raster.reproject, ctx, src="described.tif", dst="described_4326.tif", dst_crs="EPSG:4326")
    assert result.descriptions == ["nir", "swir"]
    assert result.colorinterp == ["gray", "undefined"]
    assert result.tags["SENSOR"] == "test"


def test_reproject_writes_512_tiles_with_the_requested_compression(
    ctx: OperationContext, workspace_dir: Path
):
    result = call(
        raster.reproject, ctx, src="RGB.byte.tif", dst="zstd.tif", dst_crs="EPSG:4326", compress="ZSTD"
    )
    assert result.block_shapes == [(512, 512)] * 3
    assert result.compression == "ZSTD"
    with rasterio.open(workspace_dir / "zstd.tif") as out:
        assert out.tags(ns="IMAGE_STRUCTURE")["PREDICTOR"] == "2"


def test_reproject_honours_resolution(ctx: OperationContext):
    result = call(
        raster.reproject, ctx, src="RGB.byte.tif", dst="r.tif", dst_crs="EPSG:4326", resolution=0.01
    )
    assert result.res == pytest.approx((0.01, 0.01))
    default = call(raster.reproject, ctx, src="RGB.byte.tif", dst="d.tif", dst_crs="EPSG:4326")
    assert result.bounds.left == pytest.approx(default.bounds.left)
    assert result.bounds.right >= default.bounds.right - 1e-9
    assert result.bounds.bottom <= default.bounds.bottom + 1e-9


def test_reproject_honours_width_and_height(ctx: OperationContext):
    result = call(
        raster.reproject, ctx, src="RGB.byte.tif", dst="wh.tif", dst_crs="EPSG:4326", width=300, height=200
    )
    assert (result.width, result.height) == (300, 200)


def test_reproject_width_alone_keeps_the_aspect_ratio(ctx: OperationContext):
    default = call(raster.reproject, ctx, src="RGB.byte.tif", dst="d.tif", dst_crs="EPSG:4326")
    result = call(raster.reproject, ctx, src="RGB.byte.tif", dst="w.tif", dst_crs="EPSG:4326", width=400)
    assert result.width == 400
    assert result.height == round(400 * default.height / default.width)


def test_reproject_honours_bounds_with_resolution_like_gdalwarp_te_tr(ctx: OperationContext):
    bounds = (-78.5, 23.5, -77.5, 24.5)
    result = call(
        raster.reproject,
        ctx,
        src="RGB.byte.tif",
        dst="b.tif",
        dst_crs="EPSG:4326",
        bounds=bounds,
        resolution=(0.01, 0.02),
    )
    assert (result.width, result.height) == (100, 50)
    assert result.transform == pytest.approx((0.01, 0.0, -78.5, 0.0, -0.02, 24.5))


def test_reproject_honours_bounds_with_size(ctx: OperationContext):
    bounds = (-78.5, 23.5, -77.5, 24.5)
    result = call(
        raster.reproject,
        ctx,
        src="RGB.byte.tif",
        dst="b.tif",
        dst_crs="EPSG:4326",
        bounds=bounds,
        width=10,
        height=20,
    )
    assert (result.width, result.height) == (10, 20)
    assert tuple(result.bounds.model_dump().values()) == pytest.approx(bounds)


def test_reproject_memory_does_not_grow_with_raster_size(ctx: OperationContext, workspace_dir: Path):
    size = 4096  # 64 MiB of float32
    profile = dict(driver="GTiff", width=size, height=size, count=1, dtype="float32", crs="EPSG:32618")
    profile.update(transform=north_up(200_000, 4_500_000, 30), tiled=True, blockxsize=512, blockysize=512)
    row = (np.arange(size) % 200).astype(np.float32)
    with rasterio.open(workspace_dir / "big.tif", "w", **profile) as ds:
        for top in range(0, size, 512):
            ds.write(np.broadcast_to(row, (512, size)), 1, window=((top, top + 512), (0, size)))
    tracemalloc.start()
    try:
        result = call(raster.reproject, ctx, src="big.tif", dst="big_4326.tif", dst_crs="EPSG:4326")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.width * result.height > size * size
    assert peak < 24 * 2**20 < size * size * 4


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"resolution": 0.01, "width": 100}, "conflicts"),
        ({"resolution": 0.01, "height": 100}, "conflicts"),
        ({"resolution": -1.0}, "positive"),
        ({"resolution": (0.01, 0.0)}, "positive"),
        ({"width": 0}, "at least 1"),
        ({"height": -5}, "at least 1"),
        ({"bounds": (10.0, 0.0, 10.0, 1.0)}, "left < right"),
        ({"bounds": (0.0, 5.0, 1.0, 1.0)}, "bottom < top"),
        ({"dst_nodata": -1}, "not a uint8 value"),
        ({"dst_nodata": 0.5}, "not a uint8 value"),
        ({"src_nodata": 300}, "not a uint8 value"),
        ({"compress": "WEBP"}, "3 \\(RGB\\) or 4"),
        ({"resolution": 1e-7}, "pixels per band"),
        ({"dst": "rgb.png"}, r"\.tif"),
        ({"dst": "RGB.byte.tif"}, "same file"),
    ],
)
def test_reproject_rejects_conflicting_or_impossible_options_and_writes_nothing(
    ctx: OperationContext, workspace_dir: Path, args: dict[str, Any], match: str
):
    arguments = {"src": "shade.tif", "dst": "out.tif", "dst_crs": "EPSG:4326", **args}
    if args.get("dst") == "RGB.byte.tif":
        arguments["src"] = "RGB.byte.tif"
    assert refused(raster.reproject, ctx, match, **arguments).fix
    assert not (workspace_dir / "out.tif").exists()
    assert partial_files(workspace_dir) == []


def test_reproject_rejects_jpeg_on_16_bit_data(ctx: OperationContext):
    refused(
        raster.reproject,
        ctx,
        "uint8",
        src="RGBA.uint16.tif",
        dst="j.tif",
        dst_crs="EPSG:4326",
        compress="JPEG",
    )


def test_reproject_unknown_crs_is_a_crs_error(ctx: OperationContext, workspace_dir: Path):
    with pytest.raises(CrsError, match="Unknown CRS") as caught:
        call(raster.reproject, ctx, src="RGB.byte.tif", dst="x.tif", dst_crs="EPSG:999999")
    assert "EPSG code" in caught.value.fix
    assert not (workspace_dir / "x.tif").exists()


def test_reproject_missing_source_is_not_found(ctx: OperationContext):
    with pytest.raises(NotFound, match=r"missing\.tif"):
        call(raster.reproject, ctx, src="missing.tif", dst="x.tif", dst_crs="EPSG:4326")


def test_reproject_source_without_crs_is_refused(ctx: OperationContext, workspace_dir: Path):
    with pytest.raises(RasterError, match="has no CRS"):
        call(raster.reproject, ctx, src="float_nan.tif", dst="x.tif", dst_crs="EPSG:4326")
    assert not (workspace_dir / "x.tif").exists()


def test_reproject_failing_midway_leaves_no_partial_file(ctx: OperationContext, workspace_dir: Path):
    with pytest.raises(RasterError) as caught:
        call(raster.reproject, ctx, src="corrupt.tif", dst="out/c.tif", dst_crs="EPSG:4326")
    assert "nothing was written under 'out/c.tif'" in caught.value.message
    assert str(workspace_dir) not in str(caught.value)
    assert not (workspace_dir / "out/c.tif").exists()
    assert partial_files(workspace_dir) == []


def test_reproject_failing_midway_keeps_an_existing_destination(ctx: OperationContext, workspace_dir: Path):
    """An earlier output (only llmc-mcp's own may be replaced) survives a rewrite that fails midway."""
    call(raster.reproject, ctx, src="RGB.byte.tif", dst="keep.tif", dst_crs="EPSG:4326")
    previous = (workspace_dir / "keep.tif").read_bytes()
    with pytest.raises(RasterError):
        call(raster.reproject, ctx, src="corrupt.tif", dst="keep.tif", dst_crs="EPSG:4326")
    assert (workspace_dir / "keep.tif").read_bytes() == previous


def test_reproject_replaces_a_destination_and_its_stale_sidecar(ctx: OperationContext, workspace_dir: Path):
    """An earlier output's statistics sidecar would describe the old pixels: it goes with the old file."""
    call(raster.reproject, ctx, src="RGB.byte.tif", dst="old.tif", dst_crs="EPSG:3857")
    (workspace_dir / "old.tif.aux.xml").write_text("<PAMDataset/>")
    result = call(raster.reproject, ctx, src="RGB.byte.tif", dst="old.tif", dst_crs="EPSG:4326")
    assert result.crs.epsg == 4326
    assert not (workspace_dir / "old.tif.aux.xml").exists()


@pytest.mark.parametrize(
    "form",
    ["projjson", "wkt", "proj"],
)
def test_reproject_accepts_projjson_wkt_and_proj_strings(
    ctx: OperationContext, workspace_dir: Path, form: str
):
    target = CRS.from_epsg(32617)
    text = {
        "projjson": target.to_json(),
        "wkt": target.to_wkt(),
        "proj": "+proj=utm +zone=17 +datum=WGS84 +units=m +no_defs",
    }[form]
    call(raster.reproject, ctx, src="RGB.byte.tif", dst=f"{form}.tif", dst_crs=text)
    with rasterio.open(workspace_dir / f"{form}.tif") as out:
        assert CRS.from_wkt(out.crs.to_wkt()).equals(target, ignore_axis_order=True)


# ------------------------------------------------------------------------------------------- convert


def test_convert_to_cog_validates_with_auto_overviews(ctx: OperationContext, workspace_dir: Path):
    result = call(
        raster.convert,
        ctx,
        src="shade.tif",
        dst="cog/shade.tif",
        driver="COG",
        overviews="auto",
        overview_resampling="average",
    )
    assert result.overviews == [[2, 4, 8]]  # 1024 -> 512 -> 256 -> 128 (< 256: stop)
    assert (result.driver, result.layout) == ("GTiff", "COG")  # GDAL reads a COG back as a GTiff
    valid, errors, _ = cog_validate(str(workspace_dir / "cog/shade.tif"))
    assert valid, errors


def test_convert_to_cog_without_overviews_is_still_a_cog(ctx: OperationContext, workspace_dir: Path):
    result = call(raster.convert, ctx, src="RGB.byte.tif", dst="c.tif", driver="COG", blocksize=256)
    assert result.overviews == [[], [], []]  # none unless asked: GDAL alone would pick a method
    assert result.layout == "COG" and result.block_shapes == [(256, 256)] * 3
    assert cog_validate(str(workspace_dir / "c.tif"))[0]


def test_convert_lossless_keeps_pixels_crs_and_nodata(ctx: OperationContext, workspace_dir: Path):
    result = call(raster.convert, ctx, src="RGB.byte.tif", dst="z.tif", compress="ZSTD")
    assert result.compression == "ZSTD" and result.layout is None
    assert result.block_shapes == [(512, 512)] * 3
    with rasterio.open(workspace_dir / "RGB.byte.tif") as a, rasterio.open(workspace_dir / "z.tif") as b:
        assert np.array_equal(a.read(), b.read())
        assert (a.crs, a.transform, a.nodatavals) == (b.crs, b.transform, b.nodatavals)


def test_convert_to_jpeg_is_lossy_but_close(ctx: OperationContext, workspace_dir: Path):
    result = call(raster.convert, ctx, src="RGB.byte.tif", dst="j.tif", compress="JPEG", quality=90)
    assert "JPEG" in result.compression
    with rasterio.open(workspace_dir / "RGB.byte.tif") as a, rasterio.open(workspace_dir / "j.tif") as b:
        original, lossy = a.read().astype(int), b.read().astype(int)
    assert not np.array_equal(original, lossy)
    assert np.abs(original - lossy).mean() < 3


def test_convert_builds_gtiff_overviews_with_the_requested_method(ctx: OperationContext, workspace_dir: Path):
    data = np.random.default_rng(6).random((1, 512, 512)).astype(np.float32)
    write_raster(workspace_dir / "f.tif", data)
    call(raster.convert, ctx, src="f.tif", dst="avg.tif", overviews=[2], overview_resampling="average")
    call(raster.convert, ctx, src="f.tif", dst="near.tif", overviews=[2])
    with rasterio.open(workspace_dir / "avg.tif", overview_level=0) as ds:
        average = ds.read(1)
    with rasterio.open(workspace_dir / "near.tif", overview_level=0) as ds:
        nearest = ds.read(1)
    assert np.allclose(average, data[0].reshape(256, 2, 256, 2).mean(axis=(1, 3)), atol=1e-6)
    assert np.array_equal(nearest, data[0, ::2, ::2])


def test_convert_auto_overviews_stop_below_256_pixels(ctx: OperationContext):
    result = call(raster.convert, ctx, src="RGB.byte.tif", dst="o.tif", overviews="auto")
    assert result.overviews == [[2, 4]] * 3  # smaller side 718 -> 359 -> 180


def test_convert_writes_strips_when_not_tiled(ctx: OperationContext):
    result = call(raster.convert, ctx, src="shade.tif", dst="s.tif", tiled=False, blocksize=64)
    assert result.block_shapes == [(64, 1024)]


@pytest.mark.parametrize(
    ("src", "args", "match"),
    [
        ("shade.tif", {"driver": "COG", "tiled": False}, "always tiled"),
        ("shade.tif", {"blocksize": 100}, "multiple of 16"),
        ("shade.tif", {"blocksize": 8192}, "multiple of 16 in 16..4096"),
        ("float_nan.tif", {"predictor": 2}, "integer data"),
        ("shade.tif", {"predictor": 3}, "float data"),
        ("shade.tif", {"predictor": 2, "compress": "PACKBITS"}, "only applies to DEFLATE"),
        ("shade.tif", {"quality": 80}, "quality only applies to JPEG and WEBP"),
        ("shade.tif", {"quality": 0, "compress": "JPEG"}, "outside 1..100"),
        ("RGBA.uint16.tif", {"compress": "JPEG"}, "needs 8-bit"),
        ("shade.tif", {"compress": "WEBP"}, "3 \\(RGB\\) or 4"),
        ("shade.tif", {"driver": "COG", "overviews": [2, 4]}, "explicit factors"),
        ("shade.tif", {"overview_resampling": "average"}, "no overviews are built"),
        ("shade.tif", {"overviews": [1, 2]}, "2 or more"),
        ("shade.tif", {"dst": "shade.tif"}, "same file"),
    ],
)
def test_convert_rejects_options_that_do_not_apply(
    ctx: OperationContext, workspace_dir: Path, src: str, args: dict[str, Any], match: str
):
    arguments = {"src": src, "dst": "out.tif", **args}
    assert refused(raster.convert, ctx, match, **arguments).fix
    assert not (workspace_dir / "out.tif").exists()


def test_convert_failing_midway_leaves_no_partial_file(ctx: OperationContext, workspace_dir: Path):
    with pytest.raises(RasterError, match=r"Writing 'c\.tif' from 'corrupt\.tif' failed"):
        call(raster.convert, ctx, src="corrupt.tif", dst="c.tif", driver="COG")
    assert not (workspace_dir / "c.tif").exists()
    assert partial_files(workspace_dir) == []


def test_results_are_plain_json(ctx: OperationContext):
    results: list[BaseModel] = [
        call(raster.info, ctx, path="float_nan.tif"),
        call(raster.stats, ctx, path="float_nan.tif", histogram_bins=2),
    ]
    for result in results:
        assert json.loads(result.model_dump_json())


@pytest.mark.parametrize("dst_crs", ["OGC:CRS84", "IGNF:LAMB93"])
def test_reproject_accepts_non_epsg_authority_codes(ctx: OperationContext, dst_crs: str) -> None:
    op = raster.reproject
    args = op.validate({"src": "RGB.byte.tif", "dst": "authority.tif", "dst_crs": dst_crs})
    with gdal_env(ctx):
        info = op.run(ctx, args)
    assert info.crs is not None and info.width > 0


def test_auto_overviews_on_a_raster_too_small_for_any_are_refused(ctx: OperationContext) -> None:
    op = raster.convert
    args = op.validate(
        {"src": "rotated.tif", "dst": "small.tif", "overviews": "auto", "overview_resampling": "average"}
    )
    with pytest.raises(InvalidArgument, match="builds none"), gdal_env(ctx):
        op.check(ctx, args)


def test_info_names_an_epsg_code_only_for_an_exact_match(ctx: OperationContext, workspace_dir: Path) -> None:
    profile = {
        "driver": "GTiff",
        "width": 4,
        "height": 4,
        "count": 1,
        "dtype": "uint8",
        "crs": "+proj=utm +zone=18 +ellps=WGS84 +units=m +no_defs",
        "transform": Affine(30, 0, 500000, 0, -30, 4000000),
    }
    with rasterio.open(workspace_dir / "utm_ellps.tif", "w", **profile) as dst:
        dst.write(np.zeros((1, 4, 4), dtype="uint8"))
    info = raster.info.run(ctx, raster.info.validate({"path": "utm_ellps.tif"}))
    assert info.crs is not None and info.crs.epsg is None
