"""Modules stay small enough to read (DD-MCP-081): about 500 lines, or a docstring that says why the
module is one piece."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "llmc_mcp"
MAX_MODULE_LINES = 520
"""About 500 lines (issue 22); a longer module's docstring says why it is one piece."""


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_over_about_500_lines_says_why_it_is_one_piece(path: Path) -> None:
    """Guards against modules growing back into the 900-line mixtures a newcomer cannot read: past
    about 500 lines, the module's docstring must say why it is one piece ("one piece")."""
    text = path.read_text(encoding="utf-8")
    if len(text.splitlines()) <= MAX_MODULE_LINES:
        return
    docstring = ast.get_docstring(ast.parse(text)) or ""
    assert "one piece" in docstring.lower(), f"{path.relative_to(PACKAGE)}: {len(text.splitlines())} lines"
