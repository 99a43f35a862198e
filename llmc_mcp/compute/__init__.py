"""Pixel work, below the operations: reading valid pixels (:mod:`.pixels`), cutting a grid into
windows, streaming an output through the output ledger (:mod:`.output`), describing a raster as
results show it (:mod:`.description`), reading zone polygons (:mod:`.polygons`), cell areas on the
ellipsoid (:mod:`.cell_areas`), points on a grid (:mod:`.points`), checks of a grid before its rows and
columns are taken as map directions (:mod:`.grid_checks`), a band's declared scale and offset
(:mod:`.scaling`) and progress (:mod:`.progress`).
:mod:`.engine` is the seam an operation's pixel work goes through; see DD-MCP-081."""
