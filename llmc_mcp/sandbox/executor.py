"""Run agent code like a REPL cell: compile restricted, execute, capture output and the last value.

One :class:`Session` holds one MCP session's variables. Code is compiled by
RestrictedPython; if the last statement is an expression its value is
returned, as in a notebook. Errors are reported as plain data: type, message,
the line in the agent's code, and a traceback trimmed to the agent's frames.

``error.type`` follows one rule (DD-MCP-033). An API error (an :class:`ApiError`
that escaped the cell, a gate miss included) is reported by its kind, the
snake_case string ``e.type`` holds and classic results carry
(``"invalid_argument"``, ``"reflection_required"``). Anything else that ended
the cell is reported by the CamelCase name of the Python exception class, the
name an ``except`` clause would use (``"NameError"``, ``"PolicyError"``), or of
the limit that stopped it (``"Timeout"``). So snake_case means "catch ApiError
and read e.type"; CamelCase means "your code (or its limits) raised this".
"""

from __future__ import annotations

import ast
import gc
import traceback
from collections.abc import Mapping
from typing import Any

from RestrictedPython import compile_restricted_eval, compile_restricted_exec
from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence

from llmc_mcp.sandbox.bindings import ApiError, ReflectionRequired
from llmc_mcp.sandbox.images import ShownImages
from llmc_mcp.sandbox.policy import (
    STDLIB_MODULES,
    ModuleProxy,
    OutputBuffer,
    PolicyError,
    SandboxClasses,
    advise,
    build_builtins,
    clean_text,
    cut,
    guarded_apply,
    guarded_getattr,
    guarded_getitem,
    inplace_var,
    instead,
    make_import_hook,
    stdlib_proxy,
    to_plain,
)

FILENAME = "<agent>"
MAX_CODE_CHARS = 100_000
MAX_ERROR_CHARS = 4000
MAX_HINT_CHARS = 50_000


def check_code(code: object) -> tuple[str, str, str] | None:
    """Why ``code`` cannot be run at all, as (error type, message, fix); None when it can.

    The server checks first, so such code never reaches (or breaks) the worker's channel; the
    worker checks again for any other caller of :class:`Session`.
    """
    if not isinstance(code, str):
        return "TypeError", "code must be a string.", "Pass the Python source as a string."
    if len(code) > MAX_CODE_CHARS:
        return (
            "CodeTooLong",
            f"code has {len(code)} characters; the limit is {MAX_CODE_CHARS}.",
            "Send less code per call; keep data in files or variables, not in the source.",
        )
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            "InvalidText",
            f"code contains a lone UTF-16 surrogate (U+{ord(code[exc.start]):04X} at character "
            f"{exc.start}), which is not valid Unicode text.",
            "Remove it, or write it as an escape inside a string literal ('\\ud800').",
        )
    return None


class Session:
    """The variables of one MCP session, and the policy objects its code runs under."""

    def __init__(self, api_modules: Mapping[str, ModuleProxy], output_limit: int):
        self._api_modules = dict(api_modules)
        self._importable = {**{name: stdlib_proxy(name) for name in STDLIB_MODULES}, **self._api_modules}
        self.output_limit = output_limit
        self._shown = ShownImages()
        self.reset()

    def reset(self) -> None:
        self._classes = SandboxClasses()
        builtins = build_builtins(make_import_hook(self._importable), self._classes)
        builtins["ApiError"] = ApiError
        builtins["show"] = self._shown.function()
        self.globals: dict[str, Any] = {"__builtins__": builtins, "__name__": "agent", **self._api_modules}

    def execute(self, code: str) -> dict[str, Any]:
        """Run one cell; the answer is plain, bounded data that always encodes as JSON and UTF-8.

        It always answers: an exception escaping here would end the worker, and with it the session.
        Images the code attached with ``show()`` come under ``images``, also when the code then failed:
        the agent sees what it showed before the error.
        """
        self._shown.clear()
        try:
            return _clean(self._with_images(self._execute(code)))
        except MemoryError:
            return _clean(self._with_images(self._out_of_memory(None)))
        except Exception as exc:
            return _clean(self._with_images(_failure(type(exc).__name__, _safe_str(exc), "", 0)))

    def _with_images(self, result: dict[str, Any]) -> dict[str, Any]:
        images = self._shown.take()
        if images:
            result["images"] = images
        return result

    def _execute(self, code: str) -> dict[str, Any]:
        refused = check_code(code)
        if refused is not None:
            kind, message, _fix = refused
            return _failure(kind, message, "", 0)
        output = OutputBuffer(self.output_limit)
        lines = code.splitlines()
        try:
            body, last = _compile(code)
        except SyntaxError as exc:
            return _failure("SyntaxError", str(exc.msg or exc), "", exc.lineno or 0, output)
        except _PolicyViolations as exc:
            errors = [advise(error) for error in exc.errors]
            return _failure("PolicyError", "; ".join(errors), "", _first_line(exc.errors), output)
        except (RecursionError, MemoryError, ValueError, OverflowError) as exc:
            # The parser's and RestrictedPython's limits on deeply nested code, or NUL bytes.
            message = f"the code could not be compiled ({type(exc).__name__}: {_safe_str(exc) or 'too deep'})"
            return _failure("SyntaxError", message, "", 0, output)
        self._install_guards(output)
        value = None
        try:
            if body is not None:
                exec(body, self.globals)
            if last is not None:
                value = eval(last, self.globals)
        except ApiError as exc:
            return _api_failure(exc, _agent_location(exc, lines), output)
        except (PolicyError, ImportError, AttributeError, NameError) as exc:
            kind = "PolicyError" if isinstance(exc, PolicyError) else type(exc).__name__
            return _failure(kind, _with_advice(exc), *_agent_location(exc, lines), output)
        except MemoryError:
            return self._out_of_memory(output)
        except RecursionError as exc:
            return _failure("RecursionError", str(exc)[:500], *_agent_location(exc, lines), output)
        except Exception as exc:
            return _failure(type(exc).__name__, _safe_str(exc), *_agent_location(exc, lines), output)
        try:
            result = to_plain(value)
        except MemoryError:
            return self._out_of_memory(output)
        except Exception as exc:  # a failing __len__/items of some container; never the worker's end
            return _failure(type(exc).__name__, f"the result could not be converted: {_safe_str(exc)}", "", 0)
        return {
            "ok": True,
            "stdout": output.text(),
            "stdout_dropped": output.dropped,
            "result": result,
            "error": None,
        }

    def _out_of_memory(self, output: OutputBuffer | None) -> dict[str, Any]:
        # The address-space limit was hit: whatever the session holds (a half-grown list kept in a
        # variable) would starve the next call, and GDAL short of memory misreads files instead of
        # failing. So, as after a timeout, the session starts afresh, and its memory is freed now.
        self.reset()
        gc.collect()
        return _failure(
            "MemoryError",
            "The code exceeded the memory limit. "
            "The session was reset: variables from earlier calls are gone.",
            "",
            0,
            output,
        )

    def _install_guards(self, output: OutputBuffer) -> None:
        # Names starting with '_' cannot be written by agent code, so these cannot be rebound;
        # they are reinstalled anyway so each call prints to its own buffer. `_print` too: a cell
        # whose last expression is print(...) is compiled in eval mode, without `_print = _print_()`,
        # and would otherwise find the buffer of an earlier call (or nothing).
        self.globals.update(
            _print_=output.scope,
            _print=output,
            _getattr_=guarded_getattr,
            _getitem_=guarded_getitem,
            _getiter_=iter,
            _iter_unpack_sequence_=guarded_iter_unpack_sequence,
            _unpack_sequence_=guarded_unpack_sequence,
            _write_=self._classes.write_guard,
            _inplacevar_=inplace_var,
            _apply_=guarded_apply,
            __metaclass__=self._classes.metaclass,
        )


class _PolicyViolations(Exception):
    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def _compile(code: str) -> tuple[Any, Any]:
    """Compile the body for exec and, when the code ends with an expression, that expression for eval."""
    tree = ast.parse(code, FILENAME, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = _restricted(tree, "exec") if tree.body else None
    tail = _restricted(last, "eval") if last is not None else None
    return body, tail


def _restricted(tree: ast.AST, mode: str) -> Any:
    compiler = compile_restricted_exec if mode == "exec" else compile_restricted_eval
    result = compiler(tree, FILENAME)
    if result.errors:
        raise _PolicyViolations(list(result.errors))
    return result.code


def _first_line(errors: list[str]) -> int:
    for error in errors:
        if error.startswith("Line ") and error[5:].split(":", 1)[0].isdigit():
            return int(error[5:].split(":", 1)[0])
    return 0


def _agent_location(exc: BaseException, source: list[str]) -> tuple[str, int]:
    """The traceback restricted to the agent's own frames, and the innermost agent line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == FILENAME]
    if not frames:
        return "", 0
    trace = []
    for frame in frames[-10:]:
        where = "your code" if frame.name == "<module>" else frame.name
        text = source[frame.lineno - 1].strip() if frame.lineno and frame.lineno <= len(source) else ""
        trace.append(f"line {frame.lineno}, in {where}: {text}"[:300])
    return "\n".join(trace), frames[-1].lineno or 0


def _api_failure(exc: ApiError, location: tuple[str, int], output: OutputBuffer) -> dict[str, Any]:
    """The error of an API call, read as data only.

    Agent code may subclass ApiError and raise its own, so nothing here calls a method of ``exc``
    (an override would run inside this handler) and every attribute is converted and bounded
    (``details`` may echo arguments the agent passed).
    """
    # The kind, as ``e.type`` says it and classic results say it: snake_case, one vocabulary. A
    # ReflectionRequired is always "reflection_required", whatever a forged subclass set as its type.
    kind = "reflection_required" if isinstance(exc, ReflectionRequired) else str(exc.type)
    result = _failure(kind, str(exc.message), *location, output)
    extra = {"fix": exc.fix, "details": exc.details}
    result["error"].update(to_plain({k: v for k, v in extra.items() if v}, max_chars=MAX_ERROR_CHARS))
    if isinstance(exc, ReflectionRequired):
        result["reflection_required"] = to_plain(exc.hints, max_chars=MAX_HINT_CHARS)
        result["next_action"] = cut(str(exc.next_action), MAX_ERROR_CHARS)
    return result


def _with_advice(exc: BaseException) -> str:
    """The message, and for a withheld builtin (``type``, ``dir``, ``open``...) what to use instead."""
    message = str(exc)
    name = getattr(exc, "name", None) if type(exc) is NameError else None
    advice = instead(name) if isinstance(name, str) else ""
    return f"{message}: it is not available in the sandbox. Instead: {advice}." if advice else message


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return type(exc).__name__


def _clean(value: Any) -> Any:
    """Every string made UTF-8-safe: a lone surrogate in agent output must not break the channel."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _failure(
    kind: str, message: str, trace: str, line: int, output: OutputBuffer | None = None
) -> dict[str, Any]:
    return {
        "ok": False,
        "stdout": output.text() if output else "",
        "stdout_dropped": output.dropped if output else 0,
        "result": None,
        "error": {
            "type": cut(kind, 100),
            "message": cut(message, MAX_ERROR_CHARS),
            "line": line,
            "traceback": trace,
        },
    }
