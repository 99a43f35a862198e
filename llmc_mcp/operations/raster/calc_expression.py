"""``raster.calc``'s expression: Python syntax, never run as Python.

:func:`parse_expression` walks its ``ast`` against an allowlist (the input names, numbers,
arithmetic, comparisons, ``&``/``|``/``~`` and the element-wise functions of :data:`FUNCTIONS`) and
refuses anything else with the list of what is allowed. Only then does numexpr see it, and numexpr
builds its program by ``eval`` of the text, so the allowlist is the safety, not numexpr's own
``sanitize``. Integer literals are rewritten as floats first: numexpr folds constant sub-expressions
in Python, and ``9**9**9`` in Python integers would hold the worker until the wall clock killed it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

import numexpr
import numpy as np
from numexpr.expressions import functions as _NUMEXPR_FUNCTIONS

from llmc_mcp.errors import InvalidArgument

_ARITY: dict[str, int] = {
    "where": 3,
    "arctan2": 2,
    "hypot": 2,
    "minimum": 2,
    "maximum": 2,
    **dict.fromkeys(
        (
            "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
            "arccosh", "arctanh", "log", "log10", "log1p", "log2", "exp", "expm1", "sqrt", "abs",
            "floor", "ceil",
        ),
        1,
    ),
}  # fmt: skip


FUNCTIONS: dict[str, int] = {name: n for name, n in _ARITY.items() if name in _NUMEXPR_FUNCTIONS}
"""Element-wise functions an expression may call, with their argument counts: numexpr's, less its
reductions (``sum``, ``prod``, ``min``, ``max`` would reduce each window, not the raster) and its
complex and string functions; intersected with what the installed numexpr has."""


MAX_EXPRESSION_CHARS = 2000


MAX_EXPRESSION_NODES = 400


MAX_CONSTANT = 1e300


_OPERATORS: dict[type[ast.AST], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.Mod: "%",
    ast.BitAnd: "&", ast.BitOr: "|", ast.UAdd: "+", ast.USub: "-", ast.Invert: "~",
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
}  # fmt: skip


_STRUCTURE = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.Name, ast.Constant, ast.Load)


_REFUSED_NAMES: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access (x.y)",
    ast.Subscript: "indexing (x[...])",
    ast.Lambda: "a lambda",
    ast.BoolOp: "'and'/'or' (use & and | between parenthesised comparisons)",
    ast.IfExp: "'... if ... else ...' (use where(condition, a, b))",
    ast.NamedExpr: "an assignment (:=)",
    ast.Starred: "unpacking (*x)",
}


def parse_expression(expression: str, names: Sequence[str]) -> str:
    """The expression numexpr will evaluate, or an InvalidArgument listing what is allowed.

    Walks the whole tree before anything evaluates it: node types, operators, names (the inputs),
    calls (:data:`FUNCTIONS`, by name, positional, with their argument count) and constants (real
    numbers and booleans). Integer constants become floats (see the module docstring).
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        _refuse(f"it is {len(expression)} characters long (at most {MAX_EXPRESSION_CHARS})", names)
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        _refuse(f"it is not a valid expression ({exc.msg})", names)
    except (ValueError, RecursionError, MemoryError):  # null bytes, lone surrogates, absurd nesting
        _refuse("it is not a valid expression", names)
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_EXPRESSION_NODES:
        _refuse(f"it has {len(nodes)} parts (at most {MAX_EXPRESSION_NODES})", names)
    allowed_names = set(names)
    called = {id(node.func) for node in nodes if isinstance(node, ast.Call)}
    for node in nodes:
        _check_node(node, allowed_names, names, called)
    used = {node.id for node in nodes if isinstance(node, ast.Name) and id(node) not in called}
    unused = [name for name in names if name not in used]
    if unused:
        raise InvalidArgument(
            f"inputs {unused} are not used by the expression; an unused band would still make its "
            "nodata cells nodata in the output.",
            fix="Remove them from inputs, or use them in the expression.",
        )
    return ast.unparse(_FloatConstants().visit(tree))


def _check_node(node: ast.AST, allowed_names: set[str], names: Sequence[str], called: set[int]) -> None:
    if type(node) in _OPERATORS:
        return
    if not isinstance(node, _STRUCTURE):
        what = _REFUSED_NAMES.get(type(node), f"'{type(node).__name__}' syntax")
        _refuse(f"it uses {what}", names)
    if isinstance(node, ast.Compare) and len(node.ops) > 1:
        _refuse("it chains comparisons (write (a < b) & (b < c))", names)
    elif isinstance(node, ast.Call):
        func = node.func
        if not isinstance(func, ast.Name) or func.id not in FUNCTIONS:
            shown = func.id if isinstance(func, ast.Name) else ast.unparse(func)[:40]
            _refuse(f"it calls '{shown}', which is not an allowed function", names)
        assert isinstance(func, ast.Name)
        if node.keywords or len(node.args) != FUNCTIONS[func.id]:
            _refuse(f"{func.id}() takes {FUNCTIONS[func.id]} positional argument(s)", names)
    elif isinstance(node, ast.Name):
        if id(node) not in called and node.id not in allowed_names:  # a called name is its Call's
            _refuse(f"it uses the name '{node.id}', which is not an input", names)
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            return
        if not isinstance(value, int | float) or (isinstance(value, int) and abs(value) > MAX_CONSTANT):
            _refuse(f"it contains the constant {str(value)[:40]!r}; only real numbers and True/False", names)


class _FloatConstants(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            return ast.copy_location(ast.Constant(float(node.value)), node)
        return node


def check_program(program: str, names: Sequence[str]) -> None:
    """Evaluate once on one cell: numexpr's type errors (``where(a, 1, 0)`` on a float ``a``), function
    names used bare, and constants that overflow, are refused before anything is written."""
    try:
        numexpr.evaluate(program, local_dict={n: np.ones(1) for n in names}, global_dict={})
    except (ArithmeticError, TypeError, ValueError, NotImplementedError, KeyError, SyntaxError) as exc:
        reason = str(exc).strip() or type(exc).__name__
        if "where_" in reason:
            reason = "where() needs a comparison as its first argument, e.g. where(a > 0, a, 0)"
        _refuse(f"it cannot be evaluated ({reason[:200]})", names)


def _refuse(problem: str, names: Sequence[str]) -> None:
    raise InvalidArgument(
        f"expression: {problem}. Allowed: the input names ({', '.join(names)}), numbers, True/False, "
        "+ - * / ** %, comparisons < <= > >= == !=, & | ~ between parenthesised comparisons, and the "
        f"functions {', '.join(sorted(FUNCTIONS))}.",
        fix="Rewrite the expression with only those; it is never run as Python.",
    )
