"""Hypothesis strategies for hostile tool arguments: JSON-ish values, schema-shaped values, huge strings."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

HUGE = "x" * 3_000_000
"""Several MB in one argument."""

SPECIAL_STRINGS = [
    "",
    " ",
    "RGB.byte.tif",
    "corrupt.tif",
    "float_nan.tif",
    "rotated.tif",
    "goes.tif",
    "missing.tif",
    "out.tif",
    "sub/dir/out.tif",
    "out.png",
    "../escape.tif",
    "/etc/passwd",
    "/vsicurl/http://127.0.0.1:9/x.tif",
    "WMS:http://127.0.0.1:9/",
    "<VRTDataset/>",
    ".preflight/secret.key",
    ".llmc/stubs/raster.py",
    "a\x00b",
    "line\nbreak",
    "EPSG:4326",
    "epsg:3857",
    "EPSG:999999",
    "+proj=longlat +datum=WGS84",
    "+init=epsg:4326",
    "nearest",
    "bilinear",
    "JPEG",
    "COG",
    "auto",
    "a\udcff.tif",
    "\ufb01le.tif",
    "🙂.tif",
    "é" * 2000,
    "NaN",
    "Infinity",
    "-1e309",
    "[1, 2]",
    '{"a": 1}',
    "null",
    "sha256:" + "0" * 64,
    HUGE,
]

NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 3, 16, 512, 4096, 10_000, 2**31, 2**63, 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -0.0, 5e-324]),
)

LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    NUMBERS,
    st.text(max_size=30),
    st.sampled_from(SPECIAL_STRINGS),
)

JSON = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=12,
)
"""Arbitrary JSON-ish values (NaN/inf included: a client may still send them)."""

LONE_SURROGATES = ["\ud800", "x\udfffy.tif", "EPSG:4326\udbff"]
"""Strings no UTF-8 codec accepts (os.fsencode takes only \\udc80-\\udcff). Kept out of the
classic-tool strategies while the known bug is open (test_a_lone_surrogate_...: xfail); add them to
SPECIAL_STRINGS once it is fixed."""

UNKNOWN_KEYS = st.dictionaries(
    st.text(min_size=1, max_size=12).filter(lambda k: k not in ("code", "reset")), JSON, max_size=2
)


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A rough strategy for values a JSON schema accepts (enough to reach past argument validation)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            return st.one_of([from_schema(s) for s in schema[combinator]])
    kind = schema.get("type")
    if kind == "string":
        return st.sampled_from(SPECIAL_STRINGS[:40])
    if kind == "integer":
        return st.one_of(st.integers(min_value=-3, max_value=20), st.sampled_from([256, 512, 10_000, 2**40]))
    if kind == "number":
        return st.one_of(st.floats(min_value=-1e6, max_value=1e6), st.sampled_from([0.0, 1e-9, 30.0, 1e12]))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        if "prefixItems" in schema:
            return st.tuples(*[from_schema(s) for s in schema["prefixItems"]]).map(list)
        return st.lists(from_schema(schema.get("items", {})), max_size=4)
    if kind == "object":
        return st.dictionaries(st.text(max_size=8), LEAVES, max_size=3)
    return JSON


def arguments_for(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Each known parameter either absent, schema-shaped, or any JSON value; plus unknown keys."""
    properties = schema.get("properties", {})
    optional = {
        name: st.one_of(from_schema(prop), from_schema(prop), JSON) for name, prop in properties.items()
    }
    known = st.fixed_dictionaries({}, optional=optional)
    return st.builds(lambda a, b: {**b, **a}, known, st.one_of(st.just({}), UNKNOWN_KEYS))
