"""Coordinate reference systems beyond their text: which coordinate operation takes data from one CRS
to another (:mod:`.routes`), how results name an operation (:mod:`.description`), and the parts of a
CRS and of a raster's grid that operations reason with (:mod:`.reference`)."""
