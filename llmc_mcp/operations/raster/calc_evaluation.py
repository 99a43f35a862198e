"""``raster.calc``'s evaluation: the checked program over one window of every input.

Prepared once per write (:meth:`WindowProgram.prepare`): one read per dataset for all the bands it
gives, and the program with each declared scale and offset folded in. Then, window by window
(:meth:`WindowProgram.__call__`): the cells are read, numexpr evaluates the program in float64, and a
cell is invalid when an input's is, when the result is not finite, or when it does not fit an
integer output. :mod:`.calc` checks the arguments, binds the names to bands and writes the windows.

A :class:`WindowProgram` is a pure function of its window and pickles: it reads each input through a
:class:`~llmc_mcp.compute.sources.SourceRaster`, so the engine may run windows in another process
(Dask) and get the same cells and counts as here.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numexpr
import numpy as np
from rasterio.enums import MaskFlags
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.compute.sources import PieceContext, SourceRaster
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations.raster.models import CalcInputUsed


@dataclass(frozen=True)
class Bound:
    """One expression name, bound to a band of an input that :mod:`.calc` opened and checked.

    Shared: :mod:`.calc` binds each name after checking its band, and the evaluation here reads it."""

    source: SourceRaster
    band: int
    scale: float
    offset: float
    used: CalcInputUsed

    @property
    def dataset(self) -> DatasetReader:
        return self.source.dataset()


@dataclass(frozen=True)
class _Group:
    """The bands one window read takes from one input, and the expression names they stand for."""

    source: SourceRaster
    bands: tuple[int, ...]
    names: tuple[tuple[str, int], ...]
    """Each name with the position of its band in ``bands``."""
    masked: bool
    """Whether any of the bands can hold an invalid cell (nodata, mask, alpha, NaN): else no mask is kept."""


def _groups(bound: Sequence[Bound]) -> tuple[_Group, ...]:
    """One read per input and window: a pixel-interleaved file's blocks are decoded once for all its
    bands, not once per band."""
    groups: dict[int, _Group] = {}
    for item in bound:
        ds = item.dataset
        group = groups.get(id(item.source), _Group(item.source, (), (), False))
        bands = group.bands if item.band in group.bands else (*group.bands, item.band)
        floating = np.dtype(ds.dtypes[item.band - 1]).kind == "f"
        groups[id(item.source)] = _Group(
            item.source,
            bands,
            (*group.names, (item.used.name, bands.index(item.band))),
            group.masked or floating or ds.mask_flag_enums[item.band - 1] != [MaskFlags.all_valid],
        )
    return tuple(groups.values())


def _as_stored(dtype: np.dtype) -> bool:
    """Whether numexpr may take a window's stored values as they are and widen them to float64 itself.

    Integers of up to 32 bits and float32 are exact in float64, and numexpr casts them block by block
    as it reads them, because the program multiplies every name by a float64 operand
    (:func:`_typed_program`): no float64 copy of the window is made first (measured: a 16384² NDVI of
    two float32 bands spent 1.2 s making those copies, a quarter of its evaluation). float16 is
    converted before (numexpr has no such type), and so are 64-bit integers (no unsigned 64-bit type
    either)."""
    return (dtype.kind in "iu" and dtype.itemsize <= 4) or dtype == np.float32


def _typed_program(program: str, bound: Sequence[Bound], physical: bool) -> tuple[str, dict[str, float]]:
    """The program with each scaled name as ``(name * _sN + _oN)``, every other name as
    ``(name * _one)``, and those constants (``_one`` is 1.0).

    numexpr then applies scale and offset in the pass that evaluates the expression, instead of two
    numpy passes and a temporary per input and window. Either form makes the name a float64 operand
    whether the window holds it as float64 or as stored integers or float32 (:func:`_as_stored`: an
    int32 or a float32 times a float64 operand is float64 in numexpr, exactly, and ``x * 1.0`` is
    ``x``), so every operator and function works in float64: ``a - b`` of uint8 bands cannot wrap
    around, ``a * b * c`` of int32 bands cannot overflow, ``sqrt(a)`` of a float32 band is not
    rounded to float32 on the way. The constants are operands (0-d float64 arrays to numexpr), never
    text numexpr parses, and input names never start with '_', so they cannot collide.
    """
    constants: dict[str, float] = {"_one": 1.0}
    linear: dict[str, tuple[str, str]] = {}
    for i, item in enumerate(bound):
        if physical and item.used.applied:
            linear[item.used.name] = (f"_s{i}", f"_o{i}")
            constants[f"_s{i}"], constants[f"_o{i}"] = item.scale, item.offset
    names = {item.used.name for item in bound}

    class _Typed(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in linear:
                scale, offset = linear[node.id]
                product = ast.BinOp(node, ast.Mult(), ast.Name(scale, ast.Load()))
                return ast.BinOp(product, ast.Add(), ast.Name(offset, ast.Load()))
            if node.id in names:
                return ast.BinOp(node, ast.Mult(), ast.Name("_one", ast.Load()))
            return node  # function names

    tree = _Typed().visit(ast.parse(program, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree)), constants


@dataclass(frozen=True)
class WindowProgram:
    """What one write evaluates in each window: the reads, the program and its constants, the output.

    Called with a window, wherever the engine runs it: a pure function of the window (the inputs are
    read by their checked paths there), returning the window's values and its count of valid cells."""

    ctx: PieceContext
    groups: tuple[_Group, ...]
    program: str
    constants: Mapping[str, float]
    dtype: np.dtype
    nodata: float | None

    @classmethod
    def prepare(
        cls,
        program: str,
        bound: Sequence[Bound],
        physical: bool,
        dtype: np.dtype,
        nodata: float | None,
    ) -> WindowProgram:
        """The reads grouped per input and the program with scale and offset folded in, once per write."""
        typed, constants = _typed_program(program, bound, physical)
        return cls(bound[0].source.context, _groups(bound), typed, constants, dtype, nodata)

    def __call__(self, window: Window) -> tuple[np.ndarray, int]:
        """One window of the output, and how many of its cells are valid."""
        out, ok = self.evaluate(window)
        return out, int(np.count_nonzero(ok))

    def evaluate(self, window: Window) -> tuple[np.ndarray, np.ndarray]:
        """One window of the output (its nodata where not valid), and which of its cells are valid."""
        arrays: dict[str, Any] = dict(self.constants)
        inputs_ok: np.ndarray | None = None
        for group in self.groups:
            raw, valid = read_valid(self.ctx, group.source.dataset(), group.bands, window)
            as_stored = _as_stored(raw.dtype)
            for name, position in group.names:
                arrays[name] = raw[position] if as_stored else raw[position].astype(np.float64, copy=False)
            if group.masked:
                every = valid.all(axis=0)
                inputs_ok = every if inputs_ok is None else inputs_ok & every
        compute = self._floats if self.dtype.kind == "f" else self._integers
        out, ok = compute(window, self.program, arrays, inputs_ok)
        if not ok.all():
            # calc checked that the nodata value fits the type: the cast is exact.
            fill = self.nodata if self.nodata is not None else math.nan
            np.copyto(out, fill, where=~ok, casting="unsafe")
        return out, ok

    def _floats(
        self, window: Window, program: str, arrays: dict[str, Any], inputs_ok: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Computed in float64 and cast on numexpr's final store, so no float64 window is kept. Not
        finite (x/0, log(0)) or past the output type's range (the cast makes it infinite): not valid."""
        out = np.empty((window.height, window.width), dtype=self.dtype)
        numexpr.evaluate(program, local_dict=arrays, global_dict={}, out=out, casting="unsafe")
        ok = np.isfinite(out)
        if inputs_ok is not None:
            ok &= inputs_ok
        if self.nodata is not None and not math.isnan(self.nodata):
            collide = ok & (out == self.nodata)
            if collide.any():
                raise InvalidArgument(
                    f"{int(collide.sum())} cell(s) computed to {self.nodata:g}, the output's nodata value.",
                    fix="Omit nodata (NaN is used) or pass a value the result never takes.",
                )
        return out, ok

    def _integers(
        self, window: Window, program: str, arrays: dict[str, Any], inputs_ok: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rounded half to even; not finite or outside the type's range: not valid. Invalid cells are
        zeroed in place before rounding and before the cast (the caller fills them with nodata), so
        one float64 window is kept, not one per step."""
        # A comparison's result is boolean: made float64 (a copy then, and only then) so it can be edited.
        result = np.asarray(numexpr.evaluate(program, local_dict=arrays, global_dict={}), dtype=np.float64)
        ok = np.isfinite(result)
        if inputs_ok is not None:
            ok &= inputs_ok
        limits = np.iinfo(self.dtype)
        np.copyto(result, 0.0, where=~ok)
        np.rint(result, out=result)
        ok &= result >= limits.min
        ok &= result <= limits.max
        collide = ok & (result == self.nodata)
        if collide.any():
            raise InvalidArgument(
                f"{int(collide.sum())} cell(s) of window {window} computed to {self.nodata:g}, the "
                "output's nodata value: they would read as nodata.",
                fix="Pass a nodata value the result never takes, or a float dtype (NaN is nodata).",
            )
        np.copyto(result, 0.0, where=~ok)
        return result.astype(self.dtype), ok
