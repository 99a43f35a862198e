"""The official MCP conformance suite (@modelcontextprotocol/conformance) against llmc-mcp over HTTP.

Only the generic server scenarios apply; the others need fixture tools, prompts or resources
(``test_simple_text``, ``test_simple_prompt``, ``test://static-text``...) that a real server does not
have. tests/clients/CONFORMANCE.md lists every scenario and why it runs or not; a test here keeps
that table in step with ``conformance list`` and with the scenarios run below.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.clients.conftest import NodeResult, bin_script, run_node

pytestmark = pytest.mark.clients

TABLE = Path(__file__).with_name("CONFORMANCE.md")

# (mode of the server, scenario): every scenario that applies to llmc-mcp, each run by name.
APPLICABLE = [
    ("code", "server-initialize"),
    ("code", "ping"),
    ("code", "tools-list"),
    ("code", "dns-rebinding-protection"),
    ("code", "server-sse-multiple-streams"),
    ("code", "resources-list"),
    ("classic", "server-initialize"),
    ("classic", "tools-list"),
    ("classic", "prompts-list"),
]


@pytest.fixture(scope="module")
def conformance(node22: Path, node_env: dict[str, str]):
    script = bin_script("conformance")

    def run(*args: str) -> NodeResult:
        return run_node(node22, node_env, script, list(args), timeout=120)

    return run


def documented() -> dict[str, str]:
    """Scenario -> its 'Runs' cell, from the table rows of CONFORMANCE.md."""
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| [^|]* \| ([^|]+) \|", TABLE.read_text(), flags=re.MULTILINE)
    return {name: runs.strip() for name, runs in rows}


def test_the_table_lists_every_server_scenario_of_this_version(conformance) -> None:
    res = conformance("list", "--server")
    assert res.returncode == 0, res.stderr
    listed = re.findall(r"^\s+- ([a-z0-9-]+) \[", res.stdout, flags=re.MULTILINE)
    assert len(listed) > 20, res.stdout
    table = documented()
    assert sorted(table) == sorted(listed)
    runs = {name for name, cell in table.items() if cell.startswith("yes")}
    assert runs == {scenario for _, scenario in APPLICABLE}


@pytest.mark.parametrize(("mode", "scenario"), APPLICABLE, ids=[f"{m}-{s}" for m, s in APPLICABLE])
def test_scenario_passes(conformance, http_server, mode: str, scenario: str) -> None:
    server = http_server(mode)
    res = conformance("server", "--url", server.url, "--scenario", scenario)
    summary = re.search(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings", res.stdout)
    assert summary, f"exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-2000:]}"
    passed, total, failed, warnings = map(int, summary.groups())
    assert res.returncode == 0 and failed == 0 and passed == total > 0, res.stdout[-3000:]
    assert warnings == 0, res.stdout[-3000:]
