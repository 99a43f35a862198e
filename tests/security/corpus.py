"""The attack corpus: agent code that tries to leave the sandbox, as data.

Each :class:`Attack` is one snippet sent to ``execute_code`` and the outcome it must have:

- ``denied``: refused by the policy before it reaches GDAL or the OS, with one precise error type
  (``PolicyError``, ``ImportError``, ``NameError``, ``path_refused``...) and a message fragment
  naming the rule that refused it. An attack that fails by accident (a ``TypeError`` from a wrong
  call, a file that happens not to exist) does not count.
- ``bounded``: allowed to start, stopped by a limit: ``Timeout``, ``MemoryError``,
  ``RecursionError``, ``WorkerCrashed``, or ``truncated`` (the answer was cut, with a marker,
  within the output limits). An attack whose run time grows with the machine's load (a loop that
  builds up to its bomb) lists the other limits that may stop it first in ``also``: on a loaded
  machine the wall-clock limit can win the race, and that outcome is just as bounded.

:func:`prepare` lays out the workspace the corpus expects (links that lead outside are made here,
by trusted code: the sandbox cannot create them). :func:`verdict` judges one answer; the test
suite and ``bench/security.py`` share it, so they cannot disagree on what counts.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llmc_mcp

DENIED = "denied"
BOUNDED = "bounded"
TRUNCATED = "truncated"
LIMIT_ERRORS = ("Timeout", "MemoryError", "RecursionError", "WorkerCrashed")

SAMPLE = Path(llmc_mcp.__file__).parent / "cli" / "sample" / "RGB.byte.tif"

GATE_PROBE = """\
import raster as gate_probe
gate_probe.reproject("RGB.byte.tif", "gate_probe.tif", dst_crs="EPSG:32633", resampling="cubic_spline")
"""
"""An unjustified reprojection nothing in the corpus ever justifies: the gate must refuse it after
every attack. Imported under a fresh name, since an attack may rebind ``raster`` in its own session."""

OTHER_SESSION_SETUP = "other_session_secret = 'planted by another session'"
"""Run in a second session before the corpus: the state-tampering attacks try to read it."""

PAM_SECRET = '<PAMDataset><Metadata><MDI key="LEAKED">outside-secret</MDI></Metadata></PAMDataset>'


@dataclass(frozen=True)
class Attack:
    id: str
    category: str
    code: str
    expect: str
    error: str
    match: str = ""
    also: tuple[str, ...] = ()
    """Other limit errors that are equally correct outcomes (bounded attacks only)."""

    @property
    def errors(self) -> tuple[str, ...]:
        """Every acceptable error type: the expected one first."""
        return (self.error, *self.also)


def _attack(
    category: str, expect: str, id: str, code: str, error: str, match: str = "", also: tuple[str, ...] = ()
) -> Attack:
    return Attack(id, category, textwrap.dedent(code).strip() + "\n", expect, error, match, also)


_UNDERSCORE = 'starts with "_"'  # RestrictedPython's compile-time refusal of private names
_PRIVATE = "names starting with '_' are private"  # the runtime getattr guard's
_INTERNALS = "leads to interpreter internals"
_NOT_IMPORTABLE = "is not allowed. Importable modules"
_WITHHELD = "is not available in the sandbox"
_FORMAT = "reads attributes named in the template"
_READ_ONLY = "is read-only"
_NOT_WRITABLE = "only your own dicts, lists, sets"


# Each table row: (id, code, expected error type, fragment of the message naming the refusing rule).

_IMPORTS = [
    ("import-os", "import os", "ImportError", _NOT_IMPORTABLE),
    ("import-sys", "import sys", "ImportError", _NOT_IMPORTABLE),
    ("import-subprocess", "import subprocess", "ImportError", _NOT_IMPORTABLE),
    ("import-importlib", "import importlib", "ImportError", _NOT_IMPORTABLE),
    ("import-ctypes", "import ctypes", "ImportError", _NOT_IMPORTABLE),
    ("import-pickle", "import pickle", "ImportError", _NOT_IMPORTABLE),
    ("import-gc", "import gc", "ImportError", _NOT_IMPORTABLE),
    ("import-inspect", "import inspect", "ImportError", _NOT_IMPORTABLE),
    ("import-io", "import io", "ImportError", _NOT_IMPORTABLE),
    # datetime's C code may import time for itself; agent code may not.
    ("import-time", "import time", "ImportError", _NOT_IMPORTABLE),
    ("import-from-time", "from time import sleep", "ImportError", _NOT_IMPORTABLE),
    ("import-numpy", "import numpy", "ImportError", _NOT_IMPORTABLE),
    ("import-rasterio", "import rasterio", "ImportError", _NOT_IMPORTABLE),
    ("import-dotted-submodule", "import json.decoder", "ImportError", _NOT_IMPORTABLE),
    ("import-collections-abc", "import collections.abc", "ImportError", _NOT_IMPORTABLE),
    ("import-from-os-path", "from os import path", "ImportError", _NOT_IMPORTABLE),
    ("import-api-function-as-module", "import raster.info", "ImportError", _NOT_IMPORTABLE),
    # `builtins` is a reserved name to RestrictedPython: refused at compile time.
    ("import-builtins", "import builtins", "PolicyError", "reserved name"),
    ("import-dunder-import", "__import__('os')", "PolicyError", _UNDERSCORE),
    ("import-private-module", "import _thread", "PolicyError", _UNDERSCORE),
    ("import-relative", "from . import raster", "ImportError", "Relative imports"),
    ("import-relative-parent", "from .. import os", "ImportError", "Relative imports"),
    ("import-star", "from math import *", "PolicyError", '"*" imports are not allowed'),
    # Names a module imported or defines but the sandbox withholds (modules among them).
    ("import-from-statistics-sys", "from statistics import sys", "PolicyError", _WITHHELD),
    ("import-from-json-decoder", "from json import decoder", "PolicyError", _WITHHELD),
    ("import-from-re-enum", "from re import enum", "PolicyError", _WITHHELD),
    ("import-from-functools-wraps", "from functools import wraps", "PolicyError", _WITHHELD),
    ("import-module-attribute-sys", "import statistics\nstatistics.sys", "PolicyError", _WITHHELD),
]

_UPDATE_WRAPPER = """
import functools
def mine():
    pass
functools.update_wrapper(mine, raster.info, assigned=(), updated=('__globals__',))
"""
_TRACEBACK = """
try:
    1 / 0
except Exception as e:
    e.__traceback__
"""

_DUNDER = [
    ("dunder-class", "().__class__", "PolicyError", _UNDERSCORE),
    ("dunder-subclasses", "().__class__.__bases__[0].__subclasses__()", "PolicyError", _UNDERSCORE),
    ("dunder-globals", "raster.info.__globals__", "PolicyError", _UNDERSCORE),
    ("dunder-closure", "raster.info.__closure__", "PolicyError", _UNDERSCORE),
    ("dunder-code", "(lambda: 0).__code__", "PolicyError", _UNDERSCORE),
    ("dunder-builtins", "__builtins__", "PolicyError", _UNDERSCORE),
    ("dunder-dict-of-api", "raster.__dict__", "PolicyError", _UNDERSCORE),
    ("dunder-proxy-members", "raster._members", "PolicyError", _UNDERSCORE),
    ("dunder-exception-traceback", _TRACEBACK, "PolicyError", _UNDERSCORE),
    # Identifiers are NFKC-normalized by the parser: fullwidth letters spell `__class__`.
    (
        "dunder-fullwidth-identifier",
        "x = 1\nx.__\uff43\uff4c\uff41\uff53\uff53__",
        "PolicyError",
        _UNDERSCORE,
    ),
    ("dunder-getattr-string", "getattr((), '__class__')", "PolicyError", _PRIVATE),
    ("dunder-getattr-globals", "getattr(raster.info, '__globals__')", "PolicyError", _PRIVATE),
    (
        "dunder-name-built-at-runtime",
        "getattr(1, chr(95) * 2 + 'class' + chr(95) * 2)",
        "PolicyError",
        _PRIVATE,
    ),
    ("dunder-name-joined", "getattr(raster, ''.join(['_', '_dict_', '_']))", "PolicyError", _PRIVATE),
    ("dunder-getattr-with-default", "getattr(raster, '_members', None)", "PolicyError", _PRIVATE),
    ("dunder-vars", "vars(raster)", "NameError", "'vars'"),
    ("dunder-dir", "dir(raster)", "NameError", "'dir'"),
    ("dunder-type", "type(raster)", "NameError", "'type'"),
    ("dunder-object", "object", "NameError", "'object'"),
    (
        "dunder-super",
        "class A:\n    def get(self):\n        return super()\nA().get()",
        "NameError",
        "'super'",
    ),
    ("dunder-mro", "int.mro()", "PolicyError", _INTERNALS),
    ("dunder-mro-of-api-error", "getattr(ApiError, 'mro')()", "PolicyError", _INTERNALS),
    # functools.update_wrapper/wraps get and set attributes by a name passed as data, in trusted code:
    # updated=('__globals__',) merged any function's module globals (sys, os...) into the session.
    ("dunder-update-wrapper-globals", _UPDATE_WRAPPER, "PolicyError", _WITHHELD),
    (
        "dunder-wraps-globals",
        "import functools\nfunctools.wraps(raster.info, assigned=(), updated=('__globals__',))(len)",
        "PolicyError",
        _WITHHELD,
    ),
    (
        "dunder-singledispatch-registry",
        "import functools\nfunctools.singledispatch(len)",
        "PolicyError",
        _WITHHELD,
    ),
    ("dunder-datetime-capsule", "import datetime\ndatetime.datetime_CAPI", "PolicyError", _WITHHELD),
    ("dunder-subclass-builtin", "class S(int):\n    pass", "PolicyError", "only your own classes"),
    ("dunder-subclass-proxy", "class S(raster):\n    pass", "PolicyError", "only your own classes"),
    (
        "dunder-metaclass-keyword",
        "class S(metaclass=list):\n    pass",
        "PolicyError",
        '"metaclass" is not allowed',
    ),
    ("dunder-metaclass-in-body", "class S:\n    __metaclass__ = list", "PolicyError", _UNDERSCORE),
    (
        "dunder-define-repr",
        "class S:\n    def __repr__(self):\n        return 'x'",
        "PolicyError",
        _UNDERSCORE,
    ),
]

_GEN = "def g():\n    yield 1\nit = g()\n"
_TB_FRAME = """
try:
    1 / 0
except Exception as e:
    e.tb_frame
"""
_API_TB_FRAME = """
try:
    raster.info("missing.tif")
except ApiError as e:
    getattr(e, 'tb_frame')
"""

_FRAMES = [
    ("frame-gi_frame", _GEN + "it.gi_frame", "PolicyError", "restricted name"),
    ("frame-gi_frame-getattr", _GEN + "getattr(it, 'gi_frame')", "PolicyError", _INTERNALS),
    ("frame-gi_frame-built-name", _GEN + "getattr(it, 'gi_' + 'frame')", "PolicyError", _INTERNALS),
    ("frame-gi_code", _GEN + "it.gi_code", "PolicyError", "restricted name"),
    ("frame-gi_yieldfrom", _GEN + "getattr(it, 'gi_yieldfrom')", "PolicyError", _INTERNALS),
    ("frame-cr_frame", "async def c():\n    pass\nc().cr_frame", "PolicyError", "not allowed"),
    ("frame-cr_frame-getattr", "getattr(raster.info, 'cr_frame')", "PolicyError", _INTERNALS),
    ("frame-ag_frame", "async def ag():\n    yield 1\nag().ag_frame", "PolicyError", "not allowed"),
    ("frame-tb_frame", _TB_FRAME, "PolicyError", "restricted name"),
    ("frame-tb_frame-of-api-error", _API_TB_FRAME, "PolicyError", _INTERNALS),
    ("frame-f_back", "def f():\n    pass\nf.f_back", "PolicyError", "restricted name"),
    ("frame-f_globals-getattr", "getattr(raster.info, 'f_globals')", "PolicyError", _INTERNALS),
    # The whole cell is refused at compile time, before `import sys` could even fail.
    ("frame-sys-getframe", "import sys\nsys._getframe(0)", "PolicyError", _UNDERSCORE),
]

_FORMATS = [
    ("format-str-format", "'{0.__class__}'.format(1)", "PolicyError", _FORMAT),
    ("format-format-map", "'{x.__class__}'.format_map({'x': 1})", "PolicyError", _FORMAT),
    ("format-unbound", "str.format('{0.__globals__}', raster.info)", "PolicyError", _FORMAT),
    ("format-getattr", "getattr('{0.__class__}', 'format')(1)", "PolicyError", _FORMAT),
    ("format-method-as-callback", "list(map('{0.__class__}'.format, [1]))", "PolicyError", _FORMAT),
    # Any object's .format: UserString.format forwarded to str.format (now withheld as well).
    ("format-any-object", "import datetime\ndatetime.date(2020, 1, 1).format", "PolicyError", _FORMAT),
    (
        "format-userstring",
        "import collections\ncollections.UserString('{0.__class__}').format(1)",
        "PolicyError",
        _WITHHELD,
    ),
    (
        "format-string-formatter",
        "import string\nstring.Formatter().format('{0.__class__}', 1)",
        "ImportError",
        _NOT_IMPORTABLE,
    ),
    (
        "format-logging-formatter",
        "import logging\nlogging.Formatter('%(message)s')",
        "ImportError",
        _NOT_IMPORTABLE,
    ),
    ("format-fstring-attribute", "f'{(1).__class__}'", "PolicyError", _UNDERSCORE),
    ("format-fstring-nested-spec", "f'{raster.info.__globals__!r:>10}'", "PolicyError", _UNDERSCORE),
    ("format-percent-mapping-vars", "'%(raster)s' % vars()", "NameError", "'vars'"),
    ("format-percent-mapping-globals", "'%(raster)s' % globals()", "NameError", "'globals'"),
]

_BUILTINS = [
    *(
        (f"builtin-{name}", f"{name}({args})", "NameError", f"'{name}'")
        for name, args in [
            ("open", "'/etc/passwd'"),
            ("compile", "'1', 'x', 'eval'"),
            ("input", ""),
            ("help", "raster"),
            ("exit", ""),
            ("quit", ""),
            ("globals", ""),
            ("locals", ""),
            ("memoryview", "b'x'"),
            ("setattr", "raster, 'info', None"),
            ("delattr", "raster, 'info'"),
            ("id", "raster"),
            ("classmethod", "len"),
            ("property", "len"),
        ]
    ),
    *(
        (f"raise-{name.lower()}", f"raise {name}", "NameError", f"'{name}'")
        for name in ("SystemExit", "KeyboardInterrupt", "BaseException", "GeneratorExit")
    ),
    ("builtin-eval", "eval('1 + 1')", "PolicyError", "Eval calls are not allowed"),
    ("builtin-exec", "exec('x = 1')", "PolicyError", "Exec calls are not allowed"),
    ("builtin-breakpoint", "breakpoint()", "PolicyError", "reserved name"),
    ("builtin-print-to-file", "print('x', file=[])", "PolicyError", "print(file=...)"),
    ("builtin-print-method-self", "print.__self__", "PolicyError", _UNDERSCORE),
    ("builtin-getattr-self-of-builtin", "getattr(len, '__self__')", "PolicyError", _PRIVATE),
]

_INFO = "raster.info({!r})"

_FILES = [
    ("file-absolute-passwd", _INFO.format("/etc/passwd"), "path_refused", "absolute"),
    ("file-proc-environ", _INFO.format("/proc/self/environ"), "path_refused", "absolute"),
    ("file-dev-zero", _INFO.format("/dev/zero"), "path_refused", "absolute"),
    ("file-dev-stdin", _INFO.format("/dev/stdin"), "path_refused", "absolute"),
    ("file-dotdot", _INFO.format("../outside/secret.tif"), "path_refused", "'..' is not allowed"),
    (
        "file-dotdot-inside",
        _INFO.format("sub/../../outside/secret.tif"),
        "path_refused",
        "'..' is not allowed",
    ),
    ("file-home", _INFO.format("~/secret.tif"), "path_refused", "home-relative"),
    # Links made by the fixture (the sandbox cannot make any), pointing outside the workspace.
    ("file-symlink-file", _INFO.format("links/link_out.tif"), "path_refused", "resolves outside"),
    ("file-symlink-dir", _INFO.format("linkdir/secret.tif"), "path_refused", "resolves outside"),
    ("file-symlink-to-passwd", _INFO.format("links/passwd.tif"), "path_refused", "resolves outside"),
    ("file-symlink-to-environ", _INFO.format("links/environ.tif"), "path_refused", "resolves outside"),
    ("file-symlink-to-dev-zero", _INFO.format("links/zero.tif"), "path_refused", "resolves outside"),
    ("file-fifo", _INFO.format("fifo.tif"), "path_refused", "not a regular file"),
    # GDAL opens sidecars by derived names: x.tif.aux.xml (metadata), x.tif.ovr (pixels), x.tfw.
    ("file-sidecar-pam-metadata", _INFO.format("pam/sidecar.tif"), "path_refused", "sidecar"),
    ("file-sidecar-overviews", "raster.stats('ovr/overview.tif', approx=True)", "path_refused", "sidecar"),
    ("file-sidecar-worldfile", _INFO.format("wld/worldfile.tif"), "path_refused", "sidecar"),
    (
        "file-write-absolute",
        "raster.convert('RGB.byte.tif', '/tmp/llmc-escape.tif')",
        "path_refused",
        "absolute",
    ),
    (
        "file-write-through-dir-link",
        "raster.convert('RGB.byte.tif', 'linkdir/new.tif')",
        "path_refused",
        "resolves outside",
    ),
    (
        "file-write-dangling-link",
        "raster.convert('RGB.byte.tif', 'links/dangling.tif')",
        "path_refused",
        "resolves outside",
    ),
    (
        "file-write-sidecar-link",
        "raster.convert('RGB.byte.tif', 'out/out_sidecar.tif')",
        "path_refused",
        "sidecar",
    ),
    (
        "file-write-reproject-outside",
        "raster.reproject('RGB.byte.tif', '../escaped.tif', dst_crs='EPSG:4326')",
        "path_refused",
        "'..' is not allowed",
    ),
]

_PATHS = [
    *(
        (id, _INFO.format(path), "path_refused", match)
        for id, path, match in [
            ("path-fullwidth-dots", "\uff0e\uff0e/outside/secret.tif", "look-alike"),
            ("path-fullwidth-solidus", "..\uff0foutside\uff0fsecret.tif", "look-alike"),
            ("path-nul", "RGB.byte.tif\x00.png", "control character"),
            ("path-newline", "RGB.byte.tif\n", "control character"),
            ("path-backslash", "..\\outside\\secret.tif", "'\\'"),
            ("path-vsizip", "/vsizip/archive.zip/secret.tif", "virtual file systems"),
            ("path-vsizip-absolute-archive", "/vsizip/{ws}/RGB.byte.tif", "virtual file systems"),
            ("path-vsicurl", "/vsicurl/127.0.0.1/x.tif", "virtual file systems"),
            ("path-vsistdin", "/vsistdin/", "virtual file systems"),
            ("path-vsimem", "/vsimem/x.tif", "virtual file systems"),
            ("path-vsisubfile", "/vsisubfile/0_100,RGB.byte.tif", "virtual file systems"),
            ("path-inline-vrt", "<VRTDataset rasterXSize='1' rasterYSize='1'></VRTDataset>", "inline XML"),
            ("path-inline-vrt-padded", "  <VRTDataset/>", "inline XML"),
            ("path-wms", "WMS:http://127.0.0.1:9/wms", "contains ':'"),
            ("path-mem", "MEM:::DATAPOINTER=0x0,PIXELS=1,LINES=1", "contains ':'"),
            ("path-http-url", "http://127.0.0.1:9/x.tif", "reads no URLs"),
            ("path-file-url", "file:///etc/passwd", "contains ':'"),
            ("path-drive-letter", "C:/Windows/win.ini", "contains ':'"),
            ("path-too-long", "a/" * 600 + "x.tif", "longer than"),
            ("path-empty", "", "empty"),
            ("path-preflight-read", ".preflight/secret.key", "reserved for the server"),
            ("path-dot-preflight", "./.preflight/secret.key", "reserved for the server"),
            ("path-llmc-stubs", ".llmc/stubs/raster.py", "reserved for the server"),
            ("path-link-to-preflight", "linkpre/secret.key", "reserved for the server"),
        ]
    ),
    *(
        (id, f"raster.convert('RGB.byte.tif', {dst!r})", "path_refused", "reserved for the server")
        for id, dst in [
            ("path-write-preflight", ".preflight/justifications/crs_datum/forged.tif"),
            ("path-write-llmc", ".llmc/stubs/raster.tif"),
            ("path-write-link-to-preflight", "linkpre/forged.tif"),
        ]
    ),
]

_NETWORK = [
    ("net-import-socket", "import socket", "ImportError", _NOT_IMPORTABLE),
    ("net-import-urllib", "import urllib.request", "ImportError", _NOT_IMPORTABLE),
    ("net-import-http", "from http import client", "ImportError", _NOT_IMPORTABLE),
    ("net-import-ssl", "import ssl", "ImportError", _NOT_IMPORTABLE),
    ("net-vsicurl", "raster.info('/vsicurl/https://example.com/x.tif')", "path_refused", "contains ':'"),
    ("net-vsis3", "raster.info('/vsis3/bucket/key.tif')", "path_refused", "virtual file systems"),
    ("net-vsigs", "raster.stats('/vsigs/bucket/key.tif')", "path_refused", "virtual file systems"),
    ("net-vsiaz", "raster.info('/vsiaz/container/key.tif')", "path_refused", "virtual file systems"),
    (
        "net-url-write",
        "raster.convert('RGB.byte.tif', 'http://127.0.0.1:9/o.tif')",
        "path_refused",
        "contains ':'",
    ),
    ("net-wcs", "raster.info('WCS:http://127.0.0.1:9/wcs')", "path_refused", "contains ':'"),
    ("net-unc", "raster.info('//127.0.0.1/share/x.tif')", "path_refused", "absolute"),
    ("net-proj-init-file", "crs.info('+init=epsg:4326')", "crs_error", "'+init=' definitions"),
]

_SWALLOWED = """
while True:
    try:
        while True:
            pass
    except:
        pass
"""
_FINALLY = """
try:
    raise ValueError('x')
finally:
    while True:
        pass
"""
_FINALIZER = """
def g():
    try:
        yield 1
    finally:
        while True:
            pass
it = g()
next(it)
del it
"""

_CPU = [
    ("cpu-while-true", "while True:\n    pass", "Timeout"),
    ("cpu-power-tower", "10 ** 10 ** 10", "Timeout"),
    ("cpu-pow", "pow(7, 10 ** 8)", "Timeout"),
    ("cpu-factorial", "import math\nmath.factorial(10 ** 7)", "Timeout"),
    ("cpu-swallowed-timeout", _SWALLOWED, "Timeout"),
    ("cpu-finally-loop", _FINALLY, "Timeout"),
    ("cpu-generator-finalizer", _FINALIZER, "Timeout"),
    ("cpu-regex-backtracking", "import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')", "Timeout"),
    (
        "cpu-itertools-product",
        "import itertools\nfor _ in itertools.product(range(10 ** 6), repeat=4):\n    pass",
        "Timeout",
    ),
    ("cpu-sum-huge-range", "sum(range(10 ** 15))", "Timeout"),
]

_DEEP = "x = []\nfor _ in range(100000):\n    x = [x]\n"
_OR_TIMEOUT = ("Timeout",)
"""For a bomb built by a loop (0.5-1.5 s unloaded, against a 4 s wall limit in the tests): on a loaded
machine the wall clock may stop it before its own limit does. The bombs that allocate at once keep
their single expected error, so a missing memory limit still fails the corpus."""
_NESTED_ITERATORS = """
it = iter([])
for _ in range(10 ** 6):
    it = map(abs, it)
next(it)
"""

_MEMORY = [
    ("mem-str-repeat", "'a' * 10 ** 10", "MemoryError"),
    ("mem-list-repeat", "[0] * 10 ** 10", "MemoryError"),
    ("mem-list-of-range", "list(range(10 ** 10))", "MemoryError"),
    ("mem-bytes", "bytes(10 ** 10)", "MemoryError"),
    ("mem-ljust", "'x'.ljust(10 ** 10)", "MemoryError"),
    ("mem-doubling-loop", "s = 'a'\nwhile True:\n    s = s + s", "MemoryError", _OR_TIMEOUT),
    # Holds what it allocated in a variable: the session is reset so the next call has memory again.
    ("mem-append-loop", "x = []\nwhile True:\n    x.append('x' * 10 ** 6)", "MemoryError", _OR_TIMEOUT),
    ("mem-format-builtin-width", "format(1, '0999999999d')", "MemoryError"),
    ("mem-percent-width", "'%0999999999d' % 1", "MemoryError"),
    ("mem-fstring-width", "f'{1:>999999999}'", "MemoryError"),
    ("mem-join", "''.join(['x' * 10 ** 8] * 100)", "MemoryError"),
    ("mem-recursion", "def f(n):\n    return f(n + 1)\nf(0)", "RecursionError"),
    (
        "mem-mutual-recursion",
        "def a(n):\n    return b(n)\ndef b(n):\n    return a(n)\na(0)",
        "RecursionError",
    ),
    ("mem-deep-nesting-json", _DEEP + "import json\njson.dumps(x)", "RecursionError"),
    ("mem-deep-nesting-repr", _DEEP + "repr(x)", "RecursionError"),
    (
        "mem-deep-nesting-compare",
        _DEEP + "y = []\nfor _ in range(100000):\n    y = [y]\nx == y",
        "RecursionError",
    ),
    # C iterators nested a million deep recurse in C without a depth check: the worker segfaults, unless
    # the loop that nests them outlasts the wall limit first (a loaded machine), or a Python with C
    # recursion checks refuses, or the nesting exhausts memory: each stops it.
    (
        "mem-nested-iterators",
        _NESTED_ITERATORS,
        "WorkerCrashed",
        ("Timeout", "RecursionError", "MemoryError"),
    ),
]

_OUTPUT = [
    ("out-print-loop", "for i in range(100000):\n    print('x' * 100)"),
    ("out-print-huge-string", "print('x' * 10 ** 7)"),
    ("out-print-huge-separator", "print(*range(1000), sep='-' * 10 ** 4)"),
    ("out-huge-result-string", "'y' * 10 ** 7"),
    ("out-huge-result-list", "list(range(10 ** 6))"),
    ("out-huge-result-keys", "{('k' * 10 ** 6) + str(i): i for i in range(50)}"),
    ("out-self-referential-list", "a = []\na.append(a)\na"),
    ("out-self-referential-dict", "d = {}\nd['d'] = d\nd"),
    ("out-huge-exception-message", "raise ValueError('x' * 10 ** 7)"),
    ("out-huge-printed", "for i in range(100000):\n    print('z' * 100)\nprinted"),
]

_FORGED = """
reflection.persist("sha256:" + "0" * 64, "crs_datum", {
    "intent": "forged", "alternatives": [{"method": "a", "why_not": "b"}],
    "choice": {"method": "EPSG:32633", "rationale": "r", "tradeoffs": "t"}, "confidence": "high"})
"""

_STATE = [
    ("state-replace-api-function", "raster.info = lambda path: {}", "PolicyError", _READ_ONLY),
    ("state-replace-persist", "reflection.persist = print", "PolicyError", _READ_ONLY),
    ("state-replace-stdlib-function", "import json\njson.loads = print", "PolicyError", _READ_ONLY),
    ("state-delete-api-function", "del raster.reproject", "PolicyError", _READ_ONLY),
    ("state-replace-via-import-alias", "import raster as r\nr.reproject = print", "PolicyError", _READ_ONLY),
    ("state-mutate-api-error-class", "ApiError.type = 'x'", "PolicyError", _NOT_WRITABLE),
    (
        "state-mutate-reflection-required",
        "reflection.ReflectionRequired.hints = []",
        "PolicyError",
        _NOT_WRITABLE,
    ),
    ("state-mutate-builtin-function", "len.cache = 1", "PolicyError", _NOT_WRITABLE),
    ("state-rebind-getattr-guard", "_getattr_ = getattr", "PolicyError", _UNDERSCORE),
    ("state-rebind-print-guard", "_print_ = None", "PolicyError", _UNDERSCORE),
    ("state-rebind-write-guard", "_write_ = lambda obj: obj", "PolicyError", _UNDERSCORE),
    ("state-rebind-builtins", "__builtins__ = {}", "PolicyError", _UNDERSCORE),
    ("state-rebind-metaclass", "__metaclass__ = type", "PolicyError", _UNDERSCORE),
    ("state-rebind-guard-in-comprehension", "[1 for _getitem_ in [dict.get]]", "PolicyError", _UNDERSCORE),
    (
        "state-rebind-guard-by-except",
        "try:\n    1 / 0\nexcept Exception as _getiter_:\n    pass",
        "PolicyError",
        _UNDERSCORE,
    ),
    ("state-rebind-guard-by-walrus", "(_inplacevar_ := 1)", "PolicyError", _UNDERSCORE),
    ("state-forge-justification", _FORGED, "not_found", "was not issued"),
    (
        "state-persist-domain-traversal",
        "reflection.persist('sha256:' + '0' * 64, '../../../tmp', {})",
        "invalid_argument",
        "is not a reflection domain",
    ),
    (
        "state-persist-hash-traversal",
        "reflection.persist('sha256:../../../etc/passwd', 'crs_datum', {})",
        "invalid_argument",
        "is not a justification hash",
    ),
    (
        "state-gdal-config-kwarg",
        "raster.info('RGB.byte.tif', GDAL_HTTP_PROXY='x')",
        "invalid_argument",
        "GDAL_HTTP",
    ),
    (
        "state-creation-options-kwarg",
        "raster.convert('RGB.byte.tif', 'co.tif', options={'X': '1'})",
        "invalid_argument",
        "unexpected keyword argument 'options'",
    ),
    (
        "state-pyproj-network",
        "import pyproj\npyproj.network.set_network_enabled(True)",
        "ImportError",
        _NOT_IMPORTABLE,
    ),
    ("state-numpy-config", "import numpy\nnumpy.seterr(all='ignore')", "ImportError", _NOT_IMPORTABLE),
    ("state-read-other-session", "other_session_secret", "NameError", "other_session_secret"),
]


_COMPILE_BOMBS = [
    # Refused by the compiler's own limits before anything runs; the worker must survive them.
    ("mem-compile-deep-expression", "1" + " + 1" * 5000, "SyntaxError", "could not be compiled"),
    ("mem-compile-deep-unary", "-" * 50000 + "1", "SyntaxError", "could not be compiled"),
    ("mem-parser-nesting", "x = " + "[" * 300 + "]" * 300, "SyntaxError", "too many nested parentheses"),
]


def _denied_all(category: str, rows: list[tuple[str, str, str, str]]) -> list[Attack]:
    return [_attack(category, DENIED, id, code, error, match) for id, code, error, match in rows]


def _bounded_all(category: str, rows: list[tuple[Any, ...]]) -> list[Attack]:
    """Rows ``(id, code, error)`` or ``(id, code, error, also)``."""
    return [_attack(category, BOUNDED, id, code, error, "", *also) for id, code, error, *also in rows]


CORPUS: tuple[Attack, ...] = (
    *_denied_all("imports", _IMPORTS),
    *_denied_all("dunder", _DUNDER),
    *_denied_all("frames", _FRAMES),
    *_denied_all("format", _FORMATS),
    *_denied_all("builtins", _BUILTINS),
    *_denied_all("files", _FILES),
    *_denied_all("paths", _PATHS),
    *_denied_all("network", _NETWORK),
    *_bounded_all("cpu", _CPU),
    *_bounded_all("memory", _MEMORY),
    *_denied_all("memory", _COMPILE_BOMBS),
    *_bounded_all("output", [(id, code, TRUNCATED) for id, code in _OUTPUT]),
    *_denied_all("state", _STATE),
)
CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(attack.category for attack in CORPUS))


def sizes() -> Counter[str]:
    return Counter(attack.category for attack in CORPUS)


# ------------------------------------------------------------------------------------------ workspace


def prepare(workspace: Path, outside: Path) -> None:
    """Lay out ``workspace`` with the files and links the corpus names, and ``outside`` as their target.

    ``outside`` is the canary: nothing may appear in it, and nothing in it may be read.
    """
    workspace.mkdir(parents=True, exist_ok=True)
    outside.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SAMPLE, outside / "secret.tif")
    (outside / "secret.aux.xml").write_text(PAM_SECRET)
    (outside / "secret.tfw").write_text("1\n0\n0\n-1\n0\n0\n")
    # A link to a file outside makes its whole folder's rasters refused (GDAL probes sidecars by
    # patterns no list keeps up with), so each case has a folder of its own and the root has none.
    for name in ("RGB.byte.tif", "pam/sidecar.tif", "ovr/overview.tif", "wld/worldfile.tif"):
        (workspace / name).parent.mkdir(exist_ok=True)
        shutil.copyfile(SAMPLE, workspace / name)
    for folder in (".preflight", "links", "out"):
        (workspace / folder).mkdir(exist_ok=True)
    links = {
        "links/link_out.tif": outside / "secret.tif",
        "linkdir": outside,
        "links/dangling.tif": outside / "created_by_attack.tif",
        "links/passwd.tif": Path("/etc/passwd"),
        "links/environ.tif": Path("/proc/self/environ"),
        "links/zero.tif": Path("/dev/zero"),
        "linkpre": workspace / ".preflight",
        "pam/sidecar.tif.aux.xml": outside / "secret.aux.xml",
        "ovr/overview.tif.ovr": outside / "secret.tif",
        "wld/worldfile.tfw": outside / "secret.tfw",
        "out/out_sidecar.tif.aux.xml": outside / "written_through_sidecar.aux.xml",
    }
    for name, target in links.items():
        link = workspace / name
        if not link.is_symlink():
            link.symlink_to(target)
    if not (workspace / "fifo.tif").exists():
        os.mkfifo(workspace / "fifo.tif")


def render(attack: Attack, workspace: Path) -> str:
    """The attack's code with ``{ws}`` replaced by the workspace's absolute path."""
    return attack.code.replace("{ws}", str(workspace))


def snapshot(directory: Path, skip: Path | None = None) -> set[str]:
    """Every path under ``directory`` (not following links), except those under ``skip``."""
    found: set[str] = set()
    for root, dirs, files in os.walk(directory):
        if skip is not None and Path(root) == skip.parent:
            dirs[:] = [d for d in dirs if Path(root, d) != skip]
        found.update(os.path.join(root, name) for name in (*dirs, *files))
    return found


# -------------------------------------------------------------------------------------------- verdict


def verdict(attack: Attack, data: dict[str, Any], output_limit: int) -> tuple[str, str]:
    """``(outcome, reason)``: outcome is ``denied``, ``bounded`` or ``FAILED`` (not as expected)."""
    error = data.get("error") or {}
    if attack.error == TRUNCATED:
        return _judge_truncated(data, output_limit)
    if data.get("ok"):
        return "FAILED", f"ran to completion: {json.dumps(data.get('result'), default=str)[:200]}"
    if error.get("type") not in attack.errors:
        return (
            "FAILED",
            f"expected {' or '.join(attack.errors)}, got {error.get('type')}: "
            f"{str(error.get('message'))[:200]}",
        )
    if attack.match not in str(error.get("message", "")):
        return "FAILED", f"{attack.error} but not for the expected reason: {str(error.get('message'))[:200]}"
    return attack.expect, f"{error.get('type')}: {str(error.get('message'))[:120]}"


_MARKERS = (
    "[output truncated",
    "[result truncated",
    "more characters cut",
    "more items]",
    "<nested too deep>",
)


def _judge_truncated(data: dict[str, Any], output_limit: int) -> tuple[str, str]:
    text = json.dumps(data, ensure_ascii=False, default=str)
    if len(data.get("stdout", "")) > output_limit + 500:
        return "FAILED", f"stdout has {len(data['stdout'])} characters (limit {output_limit})"
    if len(text) > 4 * output_limit + 300_000:
        return "FAILED", f"the answer has {len(text)} characters"
    marker = next((m for m in _MARKERS if m in text), None)
    if marker is None:
        return "FAILED", "no truncation marker in the answer"
    return BOUNDED, f"cut with marker {marker!r} ({len(text)} characters)"
