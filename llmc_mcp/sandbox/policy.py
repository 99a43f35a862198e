"""The RestrictedPython policy: what agent code may name, reach, import and write.

RestrictedPython rewrites the code so that every attribute read, subscript,
iteration, in-place operation, attribute write and print goes through a
guard function we supply. This module supplies them, plus the builtins and
the import hook, and nothing more. The principles:

- Deny by default: builtins and importable modules are allowlists.
- No real module object ever enters the sandbox. Even the allowed stdlib
  modules are exposed as :class:`ModuleProxy` copies of their public,
  non-module attributes, so ``statistics.sys`` or ``from json import decoder``
  lead nowhere.
- Guards check results as well as names: an attribute that yields a module,
  frame, code object or traceback is refused, whatever its name.
"""

from __future__ import annotations

import builtins
import json
import operator
import types
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

STDLIB_MODULES = ("math", "statistics", "json", "re", "itertools", "functools", "collections", "datetime")

_FORBIDDEN_TYPES = (
    types.ModuleType,
    types.FrameType,
    types.CodeType,
    types.TracebackType,
    weakref.ReferenceType,
)
_FORBIDDEN_ATTRIBUTES = INSPECT_ATTRIBUTES | {"format", "format_map", "mro"}
_FORMAT_OWNERS = (str,)

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
    """Raised by a guard; the message says what was refused and why."""


class ModuleProxy:
    """A read-only namespace standing in for a module inside the sandbox."""

    __slots__ = ("_name", "_members")

    def __init__(self, name: str, members: Mapping[str, Any]):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_members", dict(members))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._members[name]
        except KeyError:
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
    """A proxy of an allowed stdlib module with its public, non-module members."""
    module = __import__(name)
    members = {
        key: value
        for key, value in vars(module).items()
        if not key.startswith("_") and not isinstance(value, types.ModuleType)
    }
    return ModuleProxy(name, members)


def _refuse_value(value: Any, what: str) -> Any:
    if isinstance(value, _FORBIDDEN_TYPES):
        raise PolicyError(f"Access to {what} is not allowed: it leads to interpreter internals.")
    return value


def guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
    if not isinstance(name, str):
        raise TypeError("attribute name must be a string")
    if name.startswith("_"):
        raise PolicyError(f"Attribute '{name}' is not allowed: names starting with '_' are private.")
    if name in _FORBIDDEN_ATTRIBUTES and (
        name not in ("format", "format_map")
        or isinstance(obj, _FORMAT_OWNERS)
        or (isinstance(obj, type) and issubclass(obj, _FORMAT_OWNERS))
    ):
        if name in ("format", "format_map"):
            raise PolicyError("str.format and format_map are not allowed; use f-strings or '%' formatting.")
        raise PolicyError(f"Attribute '{name}' is not allowed: it leads to interpreter internals.")
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
    """The print collector shared by every scope of one call; keeps at most ``limit`` characters."""

    def __init__(self, limit: int):
        self.limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self.dropped = 0

    def __call__(self, _getattr_: Any = None) -> OutputBuffer:
        # RestrictedPython calls ``_print_(_getattr_)`` at the top of every scope; returning
        # ourselves makes all scopes, including functions defined in earlier calls, print here.
        return self

    def write(self, text: str) -> None:
        text = str(text)
        room = self.limit - self._kept
        if room > 0:
            self._parts.append(text[:room])
            self._kept += min(len(text), room)
        self.dropped += max(0, len(text) - max(room, 0))

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


def make_import_hook(modules: Mapping[str, Any]) -> Callable[..., Any]:
    """``import x`` / ``from x import y`` for allowlisted names only, returning proxies."""

    def guarded_import(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        if level != 0:
            raise ImportError("Relative imports are not allowed.")
        if name not in modules:
            allowed = ", ".join(sorted(modules))
            raise ImportError(f"Import of '{name}' is not allowed. Importable modules: {allowed}.")
        return modules[name]

    return guarded_import


def to_plain(value: Any, *, depth: int = 0, budget: list[int] | None = None) -> Any:
    """Convert a result to JSON data, bounded in depth and size; anything else becomes its repr."""
    budget = budget if budget is not None else [20_000]
    budget[0] -= 1
    if budget[0] < 0:
        return "…"
    if value is None or isinstance(value, (bool, int, str)):
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
            return f"<int with {value.bit_length()} bits>"
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if depth >= 20:
        return "<nested too deep>"
    if isinstance(value, Mapping):
        return {str(k): to_plain(v, depth=depth + 1, budget=budget) for k, v in list(value.items())[:1000]}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_plain(v, depth=depth + 1, budget=budget) for v in list(value)[:1000]]
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<unrepresentable {type(value).__name__}: {type(exc).__name__}>"
    return text[:2000]


def dumps_plain(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
