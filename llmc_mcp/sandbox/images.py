"""``show()``: agent code attaches PNG images to its ``execute_code`` result (DD-MCP-060).

A model with vision can then look at what its code made (a ``raster.preview``) instead of reading
numbers about it. The images travel beside the result, never inside the text the model reads, and
are bounded per call in count, bytes and pixels, so one cell cannot flood the host with pictures.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable, Mapping
from typing import Any

from llmc_mcp.sandbox.bindings import ApiError

MAX_IMAGES = 4
"""Images one execute_code call may attach."""
MAX_IMAGE_BYTES = 1024 * 1024
"""Bytes of one PNG (decoded): a 512-pixel preview is 10-400 kB."""
MAX_IMAGE_SIDE = 2048
"""Pixels of a PNG's longest side: raster.preview's own ``max_size`` limit."""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ShownImages:
    """The images the current call has attached; the executor clears them before each call."""

    def __init__(self) -> None:
        self._images: list[dict[str, Any]] = []

    def clear(self) -> None:
        self._images = []

    def take(self) -> list[dict[str, Any]]:
        """The attached images (``mime_type``, ``data`` in base64, ``width``, ``height``, ``bytes``)."""
        images, self._images = self._images, []
        return images

    def function(self) -> Callable[..., None]:
        """The ``show`` builtin of a sandbox session: a plain function, so agent code reaches no state
        through it but the list it appends to."""

        def show(*images: dict[str, Any] | str) -> None:
            """Attach PNG images to this execute_code call's result, for you to look at.

            Each image is a raster.preview result or its png_base64. At most 4 per call, each at most
            1 MiB and 2048 pixels a side; past that ApiError (e.type 'invalid_argument') and none of
            that call's images is added. The image is never pasted into the text you read. Example:

                show(raster.preview("in.tif", max_size=256))
            """
            if not images:
                raise _refused("show() was called without an image.", "Pass raster.preview(...)'s result.")
            checked = [_check(image, position) for position, image in enumerate(images, 1)]
            if len(self._images) + len(checked) > MAX_IMAGES:
                raise _refused(
                    f"show() attaches at most {MAX_IMAGES} images per execute_code call; this call has "
                    f"{len(self._images)} and asks for {len(checked)} more.",
                    "Show the others in the next execute_code call; the ones attached so far stay.",
                )
            self._images.extend(checked)

        return show


def _check(image: object, position: int) -> dict[str, Any]:
    """One image as the result carries it, or the ApiError saying what is wrong with it."""
    if isinstance(image, Mapping):
        if not isinstance(image.get("png_base64"), str):
            raise _refused(
                f"image {position} is a dict without a 'png_base64' string, so it is not a preview.",
                "Pass the result of raster.preview(...) as it is.",
            )
        text = image["png_base64"]
    elif isinstance(image, str):
        text = image
    else:
        raise _refused(
            f"image {position} is a {type(image).__name__}; show() takes a raster.preview result or "
            "its png_base64 string.",
            "Pass the result of raster.preview(...).",
        )
    too_big = _refused(
        f"image {position} is over {MAX_IMAGE_BYTES // 1024} KiB, the limit per image.",
        "Call raster.preview with a smaller max_size (512 is usually plenty).",
    )
    if len(text) > (MAX_IMAGE_BYTES + 2) // 3 * 4:
        raise too_big
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _refused(f"image {position} is not valid base64.", "Pass png_base64 unchanged.") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise too_big
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise _refused(f"image {position} is not a PNG.", "Pass the result of raster.preview(...).")
    width, height = struct.unpack(">II", data[16:24])
    if max(width, height) > MAX_IMAGE_SIDE:
        raise _refused(
            f"image {position} is {width}x{height} pixels; at most {MAX_IMAGE_SIDE} a side.",
            f"Call raster.preview with max_size at most {MAX_IMAGE_SIDE}.",
        )
    encoded = base64.b64encode(data).decode("ascii")
    return {"mime_type": "image/png", "data": encoded, "width": width, "height": height, "bytes": len(data)}


def _refused(message: str, fix: str) -> ApiError:
    return ApiError({"type": "invalid_argument", "message": message, "fix": fix})
