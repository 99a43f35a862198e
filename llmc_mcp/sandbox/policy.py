"""The RestrictedPython policy: what agent code may name, reach, import and write.

RestrictedPython rewrites the code so that every attribute read, subscript,
iteration, in-place operation, attribute write and print goes through a
guard function we supply. This module supplies them, plus the builtins and
the import hook, and nothing more. The principles:

- Deny by default: builtins, importable modules and the members of each
  module are allowlists. A stdlib function that reads or writes attributes
  by a name passed as data (``functools.update_wrapper``, ``wraps``) or
  formats with attribute lookups (``UserString.format``) would do, in
  trusted code, exactly what the guards refuse, so it is withheld.
- No real module object ever enters the sandbox. Even the allowed stdlib
  modules are exposed as :class:`ModuleProxy` copies of their vetted
  members, so ``statistics.sys`` or ``from json import decoder`` lead nowhere.
- Guards check results as well as names: an attribute that yields a module,
  frame, code object or traceback is refused, whatever its name.
- What leaves the sandbox is bounded plain data: :func:`to_plain` caps depth,
  items and characters and says what it cut.
"""

from __future__ import annotations

import builtins
import importlib
import itertools
import operator
import types
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from RestrictedPython.transformer import INSPECT_ATTRIBUTES

STDLIB_MEMBERS: dict[str, tuple[str, ...]] = {
    # Pure numeric functions and constants.
    "math": (
        "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "comb", "copysign",
        "cos", "cosh", "degrees", "dist", "e", "erf", "erfc", "exp", "exp2", "expm1", "fabs", "factorial",
        "floor", "fmod", "frexp", "fsum", "gamma", "gcd", "hypot", "inf", "isclose", "isfinite", "isinf",
        "isnan", "isqrt", "lcm", "ldexp", "lgamma", "log", "log10", "log1p", "log2", "modf", "nan",
        "nextafter", "perm", "pi", "pow", "prod", "radians", "remainder", "sin", "sinh", "sqrt", "tan",
        "tanh", "tau", "trunc", "ulp",
    ),
    # What statistics defines, not what it imports (sys, math, Decimal, namedtuple...).
    "statistics": (
        "NormalDist", "StatisticsError", "correlation", "covariance", "fmean", "geometric_mean",
        "harmonic_mean", "linear_regression", "mean", "median", "median_grouped", "median_high",
        "median_low", "mode", "multimode", "pstdev", "pvariance", "quantiles", "stdev", "variance",
    ),
    # Strings in, data out; dump/load want file objects and the classes exist for subclassing.
    "json": ("dumps", "loads", "JSONDecodeError"),
    "re": (
        "compile", "search", "match", "fullmatch", "split", "findall", "finditer", "sub", "subn", "escape",
        "error", "Pattern", "Match", "A", "ASCII", "I", "IGNORECASE", "M", "MULTILINE", "S", "DOTALL",
        "X", "VERBOSE", "U", "UNICODE", "NOFLAG",
    ),
    "itertools": (
        "accumulate", "batched", "chain", "combinations", "combinations_with_replacement", "compress",
        "count", "cycle", "dropwhile", "filterfalse", "groupby", "islice", "pairwise", "permutations",
        "product", "repeat", "starmap", "takewhile", "tee", "zip_longest",
    ),
    # Not update_wrapper/wraps: they get and set attributes named by the caller, in trusted code,
    # which hands out any function's __globals__. Not singledispatch: its registry holds `object`.
    "functools": ("reduce", "partial", "cache", "lru_cache", "cmp_to_key"),
    # Not UserString (its .format is str.format), UserDict/UserList (they exist to be subclassed).
    "collections": ("Counter", "OrderedDict", "defaultdict", "deque", "namedtuple", "ChainMap"),
    # Not datetime_CAPI (a raw C capsule).
    "datetime": ("date", "datetime", "time", "timedelta", "timezone", "tzinfo", "UTC", "MINYEAR", "MAXYEAR"),
}  # fmt: skip
"""The importable stdlib modules and the members each exposes: everything else is withheld."""

STDLIB_MODULES = tuple(STDLIB_MEMBERS)

_FORBIDDEN_TYPES = (
    types.ModuleType,
    types.FrameType,
    types.CodeType,
    types.TracebackType,
    weakref.ReferenceType,
)
# format/format_map on any object: str.format walks attributes and items named in the template
# ("{0.__globals__[os]}") in C, past every guard, and other classes forward to it.
_FORBIDDEN_ATTRIBUTES = INSPECT_ATTRIBUTES | {"format", "format_map", "mro"}

_SAFE_BUILTIN_NAMES = (
    "abs", "all", "any", "ascii", "bin", "bool", "bytes", "callable", "chr", "complex", "dict",
    "divmod", "enumerate", "filter", "float", "frozenset", "hash", "hex", "int", "isinstance",
    "issubclass", "iter", "len", "list", "map", "max", "min", "next", "oct", "ord", "pow", "range",
    "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip", "format",
    "ArithmeticError", "AssertionError", "AttributeError", "EOFError", "Exception", "FloatingPointError",
    "IndexError", "KeyError", "LookupError", "MemoryError", "NameError", "NotImplementedError",
    "OverflowError", "RecursionError", "RuntimeError", "StopIteration", "TimeoutError", "TypeError",
    "UnicodeError", "ValueError", "ZeroDivisionError", "ImportError",
    "None", "True", "False", "NotImplemented", "Ellipsis",
)  # fmt: skip
"""Deliberately absent: open, compile, eval, exec, __import__ (replaced), globals, locals, vars,
dir, type, object, super, getattr/setattr/delattr/hasattr (replaced by guarded versions),
input, help, breakpoint, exit, quit, memoryview, BaseException, SystemExit, KeyboardInterrupt,
GeneratorExit, classmethod/staticmethod/property (descriptor tricks)."""


class PolicyError(Exception):
    """Raised by a guard; the message says what was refused, why, and what to use instead."""


_KIND_ADVICE = (
    "to tell errors apart use e.type (the error's kind, e.g. 'reflection_required') or "
    "isinstance(e, ApiError); for any other value use isinstance(x, SomeClass)"
)
_INSTEAD: dict[str, str] = {
    # Names agents reach for, and the allowed way to get what they wanted. Advice only: nothing
    # here changes what is refused, and a name with no allowed way (frames, code, globals) has none.
    "type": _KIND_ADVICE,
    "__name__": _KIND_ADVICE,
    "__qualname__": _KIND_ADVICE,
    "__class__": _KIND_ADVICE,
    "__module__": _KIND_ADVICE,
    "mro": "use isinstance(x, SomeClass) or issubclass(A, B)",
    "__mro__": "use isinstance(x, SomeClass) or issubclass(A, B)",
    "__bases__": "use issubclass(A, B)",
    "__doc__": "read_stubs('raster.reproject') shows a function's documentation",
    "dir": "read_stubs() lists every module's functions; an error's attributes are type, message, "
    "fix and details",
    "vars": "read the attributes you need by name (an error has type, message, fix, details)",
    "__dict__": "read the attributes you need by name (an error has type, message, fix, details)",
    "globals": "variables persist between calls: refer to them by name",
    "locals": "variables persist between calls: refer to them by name",
    "open": "files are read and written through the API (raster.*, files.*; see read_stubs())",
    "object": "define a class without a base (class Point:)",
    "super": "call the base class by name (Base.method(self, ...)); an exception class needs no "
    "__init__: class MyError(ValueError): pass, then raise MyError('message')",
    "__init__": "an exception class needs no __init__: class MyError(ValueError): pass, then "
    "raise MyError('message'); a class of your own can define __init__ and set self.x",
    "eval": "write the code directly in the cell",
    "exec": "write the code directly in the cell",
    "compile": "write the code directly in the cell",
    "getattr": "name the attribute directly (x.name); getattr(x, 'name', default) works for public names",
}
_PRIVATE_ADVICE = "use the public attributes (read_stubs() documents them)"
_INTERNALS = frozenset(
    {"__code__", "__globals__", "__builtins__", "__subclasses__", "__closure__", "__func__", "__self__"}
)
"""Private names with no allowed equivalent: they lead only to interpreter internals."""


def instead(name: str) -> str:
    """The allowed way to do what a refused ``name`` is usually reached for; '' when there is none."""
    return _INSTEAD.get(name, "")


def advise(message: str) -> str:
    """A RestrictedPython compile error with the allowed alternative appended, when there is one.

    RestrictedPython names the refused identifier in double quotes (``"__name__" is an invalid
    attribute name``); eval/exec calls by the call (``Eval calls are not allowed``).
    """
    refused = message.split('"')[1] if message.count('"') >= 2 else ""
    if not refused:
        lowered = message.lower()
        refused = next((name for name in ("eval", "exec", "compile") if f"{name} calls" in lowered), "")
    advice = instead(refused)
    method = refused[2:-2] if refused.startswith("__") and refused.endswith("__") else ""
    if not advice and method and callable(getattr(builtins, method, None)) and method in _SAFE_BUILTIN_NAMES:
        advice = f"call the builtin: {method}(x)"
    if not advice and refused.startswith("_") and refused not in _INTERNALS:
        advice = (
            f"rename it without the leading underscore ({refused.lstrip('_') or 'x'})"
            if "variable name" in message
            else _PRIVATE_ADVICE
        )
    return f"{message.rstrip('.')}. Instead: {advice}." if advice else message


class ModuleProxy:
    """A read-only namespace standing in for a module inside the sandbox."""

    __slots__ = ("_members", "_name", "_withheld")

    def __init__(self, name: str, members: Mapping[str, Any], withheld: Iterable[str] = ()):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_members", dict(members))
        object.__setattr__(self, "_withheld", frozenset(withheld) - set(members))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._members[name]
        except KeyError:
            if name in self._withheld:
                raise PolicyError(
                    f"'{self._name}.{name}' is not available in the sandbox; "
                    f"available: {', '.join(sorted(self._members)[:40])}."
                ) from None
            raise AttributeError(
                f"module '{self._name}' has no attribute '{name}'"
                f" (available: {', '.join(sorted(self._members)[:40])})"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise PolicyError(f"'{self._name}' is read-only: its functions cannot be replaced.")

    def __delattr__(self, name: str) -> None:
        raise PolicyError(f"'{self._name}' is read-only: its functions cannot be removed.")

    def __dir__(self) -> Iterable[str]:
        return sorted(self._members)

    def __repr__(self) -> str:
        return f"<module {self._name}>"


def stdlib_proxy(name: str) -> ModuleProxy:
    """A proxy of an allowed stdlib module exposing its vetted members only."""
    module = importlib.import_module(name)
    members = {key: getattr(module, key) for key in STDLIB_MEMBERS[name] if hasattr(module, key)}
    for key, value in members.items():
        if isinstance(value, _FORBIDDEN_TYPES):
            raise TypeError(f"{name}.{key} is a {type(value).__name__}; it cannot be exposed")
    return ModuleProxy(name, members, withheld=(key for key in dir(module) if not key.startswith("_")))


def _refuse_value(value: Any, what: str) -> Any:
    if isinstance(value, _FORBIDDEN_TYPES):
        raise PolicyError(f"Access to {what} is not allowed: it leads to interpreter internals.")
    return value


def guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
    if not isinstance(name, str):
        raise TypeError("attribute name must be a string")
    if name.startswith("_"):
        advice = instead(name) or ("" if name in _INTERNALS else _PRIVATE_ADVICE)
        raise PolicyError(
            f"Attribute '{name}' is not allowed: names starting with '_' are private."
            + (f" Instead: {advice}." if advice else "")
        )
    if name in ("format", "format_map"):
        raise PolicyError(
            f"'.{name}' is not allowed (it reads attributes named in the template); use f-strings or '%'."
        )
    if name in _FORBIDDEN_ATTRIBUTES:
        advice = instead(name)
        raise PolicyError(
            f"Attribute '{name}' is not allowed: it leads to interpreter internals."
            + (f" Instead: {advice}." if advice else "")
        )
    try:
        value = getattr(obj, name)
    except AttributeError:
        if default:
            return default[0]
        raise
    return _refuse_value(value, f"'{name}'")


def guarded_hasattr(obj: Any, name: str) -> bool:
    try:
        guarded_getattr(obj, name)
    except (AttributeError, PolicyError):
        return False
    return True


def guarded_getitem(obj: Any, index: Any) -> Any:
    if isinstance(obj, ModuleProxy):
        raise PolicyError("Modules cannot be subscripted.")
    return _refuse_value(obj[index], "this item")


_INPLACE = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "<<=": operator.ilshift,
    ">>=": operator.irshift, "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor,
    "@=": operator.imatmul,
}  # fmt: skip


def inplace_var(op: str, target: Any, value: Any) -> Any:
    try:
        return _INPLACE[op](target, value)
    except KeyError:
        raise PolicyError(f"In-place operator {op} is not supported.") from None


def guarded_apply(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)


class SandboxClasses:
    """Tracks classes the agent defines, so that only their instances are writable."""

    def __init__(self) -> None:
        self._classes: weakref.WeakSet[type] = weakref.WeakSet()

    def metaclass(self, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> type:
        for base in bases:
            if base not in self._classes and not (isinstance(base, type) and issubclass(base, Exception)):
                raise PolicyError(
                    f"class {name}: only your own classes and exceptions can be subclassed, not {base!r}."
                )
        cls = type(name, bases, namespace)
        self._classes.add(cls)
        return cls

    def write_guard(self, obj: Any) -> Any:
        if isinstance(obj, ModuleProxy):
            raise PolicyError(f"{obj!r} is read-only: its functions cannot be replaced or removed.")
        if type(obj) in (dict, list, set, bytearray) or type(obj) in self._classes:
            return obj
        if isinstance(obj, type) and obj in self._classes:
            return obj
        if isinstance(obj, Exception) and type(obj) in self._classes:
            return obj
        raise PolicyError(
            f"Cannot modify {type(obj).__name__} objects: only your own dicts, lists, sets and "
            "instances of classes you defined are writable."
        )


class OutputBuffer:
    """The print collector shared by every scope of one call; keeps at most ``limit`` characters.

    RestrictedPython turns ``print(...)`` into ``_print._call_print(...)`` after binding
    ``_print = _print_(_getattr_)`` at the top of each scope, and ``printed`` into ``_print()``.
    The executor installs :meth:`scope` as ``_print_`` and the buffer itself as ``_print``, so every
    scope of every call (including functions defined in earlier calls, and a ``print`` that is the
    cell's last expression, compiled without that binding) prints to this call's buffer.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self.dropped = 0

    def scope(self, _getattr_: Any = None) -> OutputBuffer:
        return self

    def __call__(self) -> str:
        """``printed``: the text printed so far in this call, as a plain string."""
        return self.text()

    def write(self, text: str) -> None:
        text = str(text)
        room = self.limit - self._kept
        if room > 0:
            self._parts.append(text[:room])
            self._kept += min(len(text), room)
        self.dropped += max(0, len(text) - max(room, 0))

    def flush(self) -> None:
        """``print(..., flush=True)``: nothing to flush, the buffer is returned at the end."""

    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        if kwargs.get("file") is not None:
            raise PolicyError("print(file=...) is not allowed; print to the output.")
        kwargs["file"] = self
        builtins.print(*objects, **kwargs)

    def text(self) -> str:
        return "".join(self._parts)


def build_builtins(import_hook: Callable[..., Any], classes: SandboxClasses) -> dict[str, Any]:
    safe = {name: getattr(builtins, name) for name in _SAFE_BUILTIN_NAMES}
    safe.update(
        __import__=import_hook,
        getattr=guarded_getattr,
        hasattr=guarded_hasattr,
        __build_class__=builtins.__build_class__,
    )
    return safe


_C_HELPER_IMPORTS = frozenset({"time", "_strptime"})
"""Modules the stdlib's C code imports for itself (datetime's strftime, strptime, today...)."""


def make_import_hook(modules: Mapping[str, Any]) -> Callable[..., Any]:
    """``import x`` / ``from x import y`` for allowlisted names only, returning proxies."""

    def guarded_import(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        if level != 0:
            raise ImportError("Relative imports are not allowed.")
        if name in _C_HELPER_IMPORTS and type(fromlist) is list and not fromlist:
            # C code (PyImport_Import) imports through the calling frame's __import__, which here
            # is this hook, and always with an empty *list*; import statements pass None or a
            # tuple of names, and agent code cannot call __import__ itself. The real module goes
            # to the C function that asked for it, never into the sandbox.
            return importlib.import_module(name)
        if name not in modules:
            allowed = ", ".join(sorted(modules))
            raise ImportError(f"Import of '{name}' is not allowed. Importable modules: {allowed}.")
        return modules[name]

    return guarded_import


MAX_RESULT_CHARS = 200_000
"""Characters of strings kept in one converted result; the server cuts the rendering further."""
_MAX_ITEMS = 1000
_MAX_NODES = 20_000
_MAX_DEPTH = 20


def cut(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters cut]"


def clean_text(text: str) -> str:
    """Text that encodes as UTF-8: lone surrogates (``'\\ud800'``) become '?'."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


class _Budget:
    def __init__(self, nodes: int, chars: int):
        self.nodes = nodes
        self.chars = chars

    def text(self, text: str) -> str:
        kept = cut(text, max(self.chars, 0))
        self.chars -= min(len(text), max(self.chars, 0))
        return clean_text(kept)


def to_plain(value: Any, *, max_chars: int = MAX_RESULT_CHARS) -> Any:
    """Convert a result to JSON data, bounded in depth, items, nodes and characters.

    Anything that is not JSON data becomes its (bounded) repr. Every cut leaves a marker: a string
    ends with ``… [N more characters cut]``, a collection gets a last item ``… [N more items]``,
    and a structure nested too deep becomes ``<nested too deep>``. Copies are made item by item
    (never ``list(value)``), so a huge collection costs no more than what is kept.
    """
    return _plain(value, 0, _Budget(_MAX_NODES, max_chars))


def _plain(value: Any, depth: int, budget: _Budget) -> Any:
    budget.nodes -= 1
    if budget.nodes < 0:
        return "…"
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value) if value.bit_length() <= 256 else f"<int with {value.bit_length()} bits>"
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, str):
        return budget.text(str(value))
    if depth >= _MAX_DEPTH:
        return "<nested too deep>"
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in itertools.islice(value.items(), _MAX_ITEMS):
            name = budget.text(key) if isinstance(key, str) else budget.text(_safe_repr(key))
            out[name] = _plain(item, depth + 1, budget)
        if len(value) > _MAX_ITEMS:
            out["…"] = f"[{len(value) - _MAX_ITEMS} more items]"
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(item, depth + 1, budget) for item in itertools.islice(value, _MAX_ITEMS)]
        if len(value) > _MAX_ITEMS:
            items.append(f"… [{len(value) - _MAX_ITEMS} more items]")
        return items
    return budget.text(_safe_repr(value)[:2000])


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:
        return f"<unrepresentable {type(value).__name__}: {type(exc).__name__}>"
