"""The files the Python runtime reads: a confined worker must still read them after startup, and the
server's private state must not lie among them."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def runtime_paths() -> list[str]:
    """What the worker must still read after startup: Python, its packages, shared libraries, data.

    Not every ``sys.path`` entry: started with ``python -m`` from a home directory, the server has
    that directory on its path, and so would the worker. Only entries inside the interpreter's
    prefixes or a site-packages directory count; the package's own checkout is added by name.
    """
    import site

    import llmc_mcp

    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    sites = {*site.getsitepackages(), site.getusersitepackages()}
    roots = [Path(p).resolve() for p in prefixes | sites]
    imports = [p for p in sys.path if p and any(Path(p).resolve().is_relative_to(r) for r in roots)]
    paths = [
        "/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/localtime",
        *sorted(prefixes), *sorted(sites), *imports,
        os.path.dirname(os.path.realpath(sys.executable)),
        str(Path(llmc_mcp.__file__).resolve().parent.parent),
        *(os.environ[k] for k in ("GDAL_DATA", "PROJ_DATA", "PROJ_LIB") if k in os.environ),
    ]  # fmt: skip
    return list(dict.fromkeys(paths))
