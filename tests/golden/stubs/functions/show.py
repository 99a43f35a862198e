from typing import Any


def show(*images: dict[str, Any] | str) -> None:
    """Attach PNG images to this execute_code call's result, for you to look at.

    Each image is a raster.preview result or its png_base64. At most 4 per call, each at most
    1 MiB and 2048 pixels a side; past that ApiError (e.type 'invalid_argument') and none of
    that call's images is added. The image is never pasted into the text you read. Example:

        show(raster.preview("in.tif", max_size=256))
    """
