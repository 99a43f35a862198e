"""The operation catalog. Add an operation here and every face (classic tools, stubs,
sandbox bindings) picks it up; nothing else needs editing."""

from __future__ import annotations

from llmc_mcp.operations import crs, files, hydrology, provenance, raster, stac, terrain
from llmc_mcp.operations.catalog import Operation, OperationContext, get_operation, publish
from llmc_mcp.operations.workflows import operations as workflows

CATALOG: tuple[Operation, ...] = (
    raster.info,
    raster.stats,
    raster.preview,
    raster.reproject,
    raster.convert,
    raster.area,
    raster.calc,
    raster.calc_stats,
    raster.sample,
    raster.align,
    raster.merge,
    raster.reclassify,
    raster.clip,
    raster.zonal_stats,
    crs.info,
    crs.transform,
    files.list,
    files.remove,
    provenance.lineage,
    terrain.slope,
    terrain.aspect,
    terrain.hillshade,
    terrain.roughness,
    hydrology.condition,
    hydrology.flow_direction,
    hydrology.flow_accumulation,
    hydrology.streams,
    hydrology.watershed,
    workflows.list,
    workflows.describe,
    workflows.start,
    workflows.submit,
    workflows.state,
    stac.search,
    stac.item,
)

NAMESPACES: tuple[str, ...] = tuple(dict.fromkeys(op.namespace for op in CATALOG))
publish(CATALOG)


def namespace_operations(namespace: str) -> tuple[Operation, ...]:
    return tuple(op for op in CATALOG if op.namespace == namespace)


__all__ = ["CATALOG", "NAMESPACES", "Operation", "OperationContext", "get_operation", "namespace_operations"]
