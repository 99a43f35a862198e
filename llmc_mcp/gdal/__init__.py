"""The hardened GDAL every layer above runs under: which drivers exist and how the network is cut off
(:mod:`.environment`), how an agent-named raster is opened and checked (:mod:`.datasets`), and how
GDAL's failures read (:mod:`.messages`)."""
