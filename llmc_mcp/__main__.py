"""`python -m llmc_mcp` is the `llmc-mcp` command.

``python -m`` puts the current directory first on ``sys.path``. A server started from a source
checkout, or from a workspace holding a file named like a dependency (``mcp.py``, ``numpy/``), would
then import that instead of the installed code. The current directory is dropped before anything
else is imported; ``python -I -m llmc_mcp`` (what the demo runs) avoids it altogether.
"""

import os
import sys


def _drop_working_directory(path: list[str]) -> list[str]:
    """``path`` without the entry ``python -m`` put first: ``''``, ``'.'`` or the current directory.

    Only that first entry goes: the same directory later on the path was put there on purpose
    (``PYTHONPATH``, a ``.pth`` file of an editable install).
    """
    if not path:
        return path
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # the working directory was deleted: nothing can be imported from it anyway
        return path
    first = path[0]
    if first in ("", ".") or os.path.realpath(first) == here:
        return path[1:]
    return path


sys.path[:] = _drop_working_directory(sys.path)

from llmc_mcp.cli.main import main  # noqa: E402  (sys.path must be cleaned first)

raise SystemExit(main())
