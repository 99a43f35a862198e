"""Run agent code like a REPL cell: compile restricted, execute, capture output and the last value.

One :class:`Session` holds one MCP session's variables. Code is compiled by
RestrictedPython; if the last statement is an expression its value is
returned, as in a notebook. Errors are reported as plain data: type, message,
the line in the agent's code, and a traceback trimmed to the agent's frames.
"""

from __future__ import annotations

import ast
import traceback
from collections.abc import Mapping
from typing import Any

from RestrictedPython import compile_restricted_eval, compile_restricted_exec

from llmc_mcp.sandbox.bindings import ApiError, ReflectionRequired
from llmc_mcp.sandbox.policy import (
    STDLIB_MODULES,
    ModuleProxy,
    OutputBuffer,
    PolicyError,
    SandboxClasses,
    build_builtins,
    guarded_apply,
    guarded_getattr,
    guarded_getitem,
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    inplace_var,
    make_import_hook,
    stdlib_proxy,
    to_plain,
)

FILENAME = "<agent>"
MAX_CODE_CHARS = 100_000


class Session:
    """The variables of one MCP session, and the policy objects its code runs under."""

    def __init__(self, api_modules: Mapping[str, ModuleProxy], output_limit: int):
        self._api_modules = dict(api_modules)
        self._importable = {**{name: stdlib_proxy(name) for name in STDLIB_MODULES}, **self._api_modules}
        self.output_limit = output_limit
        self.reset()

    def reset(self) -> None:
        self._classes = SandboxClasses()
        builtins = build_builtins(make_import_hook(self._importable), self._classes)
        builtins["ApiError"] = ApiError
        self.globals: dict[str, Any] = {"__builtins__": builtins, "__name__": "agent", **self._api_modules}

    def execute(self, code: str) -> dict[str, Any]:
        if not isinstance(code, str):
            return _failure("TypeError", "code must be a string", "", 0)
        if len(code) > MAX_CODE_CHARS:
            return _failure(
                "CodeTooLong", f"code has {len(code)} characters; the limit is {MAX_CODE_CHARS}", "", 0
            )
        output = OutputBuffer(self.output_limit)
        lines = code.splitlines()
        try:
            body, last = _compile(code)
        except SyntaxError as exc:
            return _failure("SyntaxError", str(exc.msg or exc), "", exc.lineno or 0, output)
        except _PolicyViolations as exc:
            return _failure("PolicyError", "; ".join(exc.errors), "", _first_line(exc.errors), output)
        self._install_guards(output)
        value = None
        try:
            if body is not None:
                exec(body, self.globals)
            if last is not None:
                value = eval(last, self.globals)
        except ReflectionRequired as exc:
            result = _failure("ReflectionRequired", exc.message, *_agent_location(exc, lines), output)
            result["reflection_required"] = exc.hints
            result["next_action"] = exc.next_action
            return result
        except ApiError as exc:
            result = _failure(exc.type, exc.message, *_agent_location(exc, lines), output)
            result["error"].update({k: v for k, v in exc.as_dict().items() if k in ("fix", "details")})
            return result
        except (PolicyError, ImportError, AttributeError, NameError) as exc:
            kind = "PolicyError" if isinstance(exc, PolicyError) else type(exc).__name__
            return _failure(kind, str(exc), *_agent_location(exc, lines), output)
        except MemoryError:
            return _failure("MemoryError", "the code exceeded the memory limit", "", 0, output)
        except RecursionError as exc:
            return _failure("RecursionError", str(exc)[:500], *_agent_location(exc, lines), output)
        except Exception as exc:
            return _failure(type(exc).__name__, _safe_str(exc), *_agent_location(exc, lines), output)
        return {
            "ok": True,
            "stdout": output.text(),
            "stdout_dropped": output.dropped,
            "result": to_plain(value),
            "error": None,
        }

    def _install_guards(self, output: OutputBuffer) -> None:
        # Names starting with '_' cannot be written by agent code, so these cannot be rebound;
        # they are reinstalled anyway so each call prints to its own buffer.
        self.globals.update(
            _print_=output,
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


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)[:2000]
    except Exception:
        return type(exc).__name__


def _failure(
    kind: str, message: str, trace: str, line: int, output: OutputBuffer | None = None
) -> dict[str, Any]:
    return {
        "ok": False,
        "stdout": output.text() if output else "",
        "stdout_dropped": output.dropped if output else 0,
        "result": None,
        "error": {"type": kind, "message": message[:4000], "line": line, "traceback": trace},
    }
