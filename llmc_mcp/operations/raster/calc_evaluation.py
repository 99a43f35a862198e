"""``raster.calc``'s evaluation: the checked program over one window of every input.

Prepared once per write (:meth:`WindowProgram.prepare`): one read per dataset for all the bands it
gives, and the program with each declared scale and offset folded in. Then, window by window
(:meth:`WindowProgram.compute`): the cells are read, numexpr evaluates the program in float64, and a
cell is invalid when an input's is, when the result is not finite, or when it does not fit an
integer output. :mod:`.calc` checks the arguments, binds the names to bands and writes the windows.
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
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.operations.raster.models import CalcInputUsed


@dataclass
class Bound:
    """One expression name, bound to an open dataset's band.

    Shared: :mod:`.calc` binds each name after checking its band, and the evaluation here reads it."""

    dataset: DatasetReader
    band: int
    scale: float
    offset: float
    used: CalcInputUsed


@dataclass
class _Group:
    """The bands one window read takes from one dataset, and the expression names they stand for."""

    dataset: DatasetReader
    bands: list[int]
    names: list[tuple[str, int]]
    """Each name with the position of its band in ``bands``."""
    masked: bool
    """Whether any of the bands can hold an invalid cell (nodata, mask, alpha, NaN): else no mask is kept."""


def _groups(bound: Sequence[Bound]) -> list[_Group]:
    """One read per dataset and window: a pixel-interleaved file's blocks are decoded once for all its
    bands, not once per band."""
    groups: dict[int, _Group] = {}
    for item in bound:
        ds = item.dataset
        group = groups.setdefault(id(ds), _Group(ds, [], [], False))
        if item.band not in group.bands:
            group.bands.append(item.band)
        group.names.append((item.used.name, group.bands.index(item.band)))
        floating = np.dtype(ds.dtypes[item.band - 1]).kind == "f"
        group.masked |= floating or ds.mask_flag_enums[item.band - 1] != [MaskFlags.all_valid]
    return list(groups.values())


def _physical_program(program: str, bound: Sequence[Bound], physical: bool) -> tuple[str, dict[str, float]]:
    """The program with each scaled name as ``(name * _sN + _oN)``, and those constants.

    numexpr then applies scale and offset in the pass that evaluates the expression, instead of two
    numpy passes and a temporary per input and window. Input names never start with '_', so the
    constants cannot collide with them; they are operands, never text numexpr parses.
    """
    constants: dict[str, float] = {}
    linear: dict[str, tuple[str, str]] = {}
    for i, item in enumerate(bound):
        if physical and item.used.applied:
            linear[item.used.name] = (f"_s{i}", f"_o{i}")
            constants[f"_s{i}"], constants[f"_o{i}"] = item.scale, item.offset
    if not linear:
        return program, constants

    class _Scaled(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id not in linear:  # function names and unscaled inputs
                return node
            scale, offset = linear[node.id]
            product = ast.BinOp(node, ast.Mult(), ast.Name(scale, ast.Load()))
            return ast.BinOp(product, ast.Add(), ast.Name(offset, ast.Load()))

    tree = _Scaled().visit(ast.parse(program, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree)), constants


@dataclass
class WindowProgram:
    """What one write evaluates in each window: the reads, the program and its constants, the output."""

    ctx: OperationContext
    groups: Sequence[_Group]
    program: str
    constants: Mapping[str, float]
    dtype: np.dtype
    nodata: float | None

    @classmethod
    def prepare(
        cls,
        ctx: OperationContext,
        program: str,
        bound: Sequence[Bound],
        physical: bool,
        dtype: np.dtype,
        nodata: float | None,
    ) -> WindowProgram:
        """The reads grouped per dataset and the program with scale and offset folded in, once per write."""
        scaled, constants = _physical_program(program, bound, physical)
        return cls(ctx, _groups(bound), scaled, constants, dtype, nodata)

    def compute(self, window: Window) -> tuple[np.ndarray, int]:
        """One window of the output, and how many of its cells are valid."""
        arrays: dict[str, Any] = dict(self.constants)
        inputs_ok: np.ndarray | None = None
        for group in self.groups:
            raw, valid = read_valid(self.ctx, group.dataset, group.bands, window)
            for name, position in group.names:
                arrays[name] = raw[position].astype(np.float64)
            if group.masked:
                every = valid.all(axis=0)
                inputs_ok = every if inputs_ok is None else inputs_ok & every
        compute = self._floats if self.dtype.kind == "f" else self._integers
        out, ok = compute(window, self.program, arrays, inputs_ok)
        good = int(np.count_nonzero(ok))
        if good < ok.size:
            # calc checked that the nodata value fits the type: the cast is exact.
            fill = self.nodata if self.nodata is not None else math.nan
            np.copyto(out, fill, where=~ok, casting="unsafe")
        return out, good

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
        """Rounded half to even; not finite or outside the type's range: not valid."""
        result = numexpr.evaluate(program, local_dict=arrays, global_dict={})
        ok = np.isfinite(result)
        if inputs_ok is not None:
            ok &= inputs_ok
        limits = np.iinfo(self.dtype)
        result = np.rint(np.where(ok, result, 0.0))
        ok &= (result >= limits.min) & (result <= limits.max)
        collide = ok & (result == self.nodata)
        if collide.any():
            raise InvalidArgument(
                f"{int(collide.sum())} cell(s) of window {window} computed to {self.nodata:g}, the "
                "output's nodata value: they would read as nodata.",
                fix="Pass a nodata value the result never takes, or a float dtype (NaN is nodata).",
            )
        return np.where(ok, result, 0.0).astype(self.dtype), ok
