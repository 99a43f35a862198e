"""Malformed protocol traffic over stdio against the real ``llmc-mcp serve`` subprocess (raw pipes).

Garbage lines, truncated JSON, wrong JSON types for id/method/params, unknown methods, a message of
several MB and invalid UTF-8 must not take the server down: afterwards a proper ``initialize`` and
``tools/list`` succeed on the same process, and a tool call works. Where JSON-RPC 2.0 requires a
response (a request with an id; a parse error, with id null), the response must be an error object.

The MCP SDK (2.3.0) drops frames it cannot parse or validate without answering (logged at DEBUG):
the tests for those responses are ``xfail(strict=True)`` and name the SDK as the place of the fix.
A lone UTF-16 surrogate escape (``"\\ud800"``), which JSON.stringify emits for a split emoji, is one
such frame: the client waits forever for its answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability._rawstdio import RawServer, alive, child_pids

MB = 1024 * 1024
NO_ANSWER_WAIT = 1.5
"""How long to wait before concluding that no answer will come."""

GARBAGE: list[bytes] = [
    b"hello",
    b"",
    b"   ",
    b'{"jsonrpc":"2.0","id":1,"method":"initi',
    b'{"jsonrpc":"2.0","id":2,"method":"ping"',
    b"}{",
    b"42",
    b"null",
    b'"a string"',
    b"[]",
    b'[{"jsonrpc":"2.0","id":3,"method":"ping"}]',
    b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
    b'{"jsonrpc":"2.0","id":[1],"method":"ping"}',
    b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":4,"method":42}',
    b'{"jsonrpc":"2.0","id":5,"method":null}',
    b'{"jsonrpc":"2.0","id":6,"method":"tools/list","params":"x"}',
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2]}',
    b'{"jsonrpc":"1.0","id":8,"method":"ping"}',
    b'{"id":9,"method":"ping"}',
    b'{"jsonrpc":"2.0","method":"notifications/no-such-thing"}',
    b'{"jsonrpc":"2.0","id":10,"result":{}}',
    b'{"jsonrpc":"2.0","id":11,"error":{"code":1,"message":"unsolicited"}}',
    b'{"jsonrpc":"2.0","id":12,"method":"initialize","params":{}}',
    b"\xff\xfe\x00garbage",
    b'\xff{"jsonrpc":"2.0","id":13,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":14,"method":"ping","params":{"x":"\xc3\x28"}}',
    b'{"jsonrpc":"2.0","id":15,"method":"ping","params":{"x":NaN}}',
    b'{"jsonrpc":"2.0","id":16,"method":"ping","params":' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    b"\x00" * 1000,
]


@pytest.fixture
def server(workspace_dir: Path) -> Iterator[RawServer]:
    raw = RawServer(workspace_dir, "--exec-timeout", "20")
    try:
        yield raw
    finally:
        if raw.process.poll() is None:
            raw.kill()


def assert_serving(server: RawServer) -> None:
    """The same process still does the whole handshake and a real tool call."""
    init = server.initialize()
    assert init["result"]["serverInfo"]["name"] == "llmc-mcp", init
    tools = server.request("tools/list")
    assert sorted(t["name"] for t in tools["result"]["tools"]) == ["00_INIT", "execute_code", "read_stubs"]
    done = server.call_tool("execute_code", {"code": "1 + 1"})
    assert done["result"]["structuredContent"]["result"] == 2, done
    assert server.process.poll() is None
    assert not server.garbage, f"non-JSON-RPC bytes on stdout: {server.garbage}"


def test_garbage_before_the_handshake_does_not_stop_the_server(server: RawServer) -> None:
    for line in GARBAGE:
        server.send_raw(line)
    server.drain(1.0)
    assert_serving(server)


def test_garbage_after_the_handshake_does_not_stop_the_server(server: RawServer) -> None:
    server.initialize()
    server.call_tool("execute_code", {"code": "kept = 41"})
    for line in GARBAGE:
        server.send_raw(line)
    server.drain(1.0)
    assert server.request("ping")["result"] == {}
    # The session (and its worker) survived the noise.
    kept = server.call_tool("execute_code", {"code": "kept + 1"})
    assert kept["result"]["structuredContent"]["result"] == 42, kept
    assert server.process.poll() is None and not server.garbage


def test_an_unknown_method_gets_method_not_found(server: RawServer) -> None:
    server.initialize()
    reply = server.request("no/such/method")
    assert reply["error"]["code"] == -32601, reply
    reply = server.request("tools/frobnicate", {"x": 1})
    assert reply["error"]["code"] == -32601, reply


def test_bad_tool_call_params_get_json_rpc_or_tool_errors(server: RawServer) -> None:
    server.initialize()
    for params in ({"name": "execute_code", "arguments": "code"}, {"arguments": {}}, {"name": 5}):
        server.send({"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": params})
        reply = server.wait_for(77, 10)
        assert reply is not None and reply["error"]["code"] == -32602, (params, reply)
    unknown = server.call_tool("no_such_tool", {})
    assert unknown["result"]["isError"] is True
    wrong = server.call_tool("execute_code", {"code": 5})
    assert wrong["result"]["isError"] is True and "valid string" in wrong["result"]["content"][0]["text"]
    assert_serving_after_init(server)


def assert_serving_after_init(server: RawServer) -> None:
    done = server.call_tool("execute_code", {"code": "2 + 2"})
    assert done["result"]["structuredContent"]["result"] == 4, done


def test_a_message_of_several_megabytes_is_answered(server: RawServer) -> None:
    server.initialize()
    pad = "x" * (6 * MB)
    assert server.request("ping", {"pad": pad}, timeout=60)["result"] == {}
    huge_code = server.call_tool("execute_code", {"code": "# " + pad}, timeout=60)
    error = huge_code["result"]["structuredContent"]["error"]
    assert error["type"] == "CodeTooLong" and "Nothing ran" in error["message"], error
    assert server.call_tool("read_stubs", {"module": pad}, timeout=60)["result"]["isError"] is True
    assert_serving_after_init(server)


def test_a_huge_argument_is_not_echoed_back(server: RawServer) -> None:
    server.initialize()
    info = server.call_tool("read_stubs", {"module": "x" * MB}, timeout=60)
    assert info["result"]["isError"] is True
    assert len(json.dumps(info)) < 100_000, f"a 1 MB argument came back as {len(json.dumps(info))} bytes"


def test_a_message_split_across_writes_is_reassembled(server: RawServer) -> None:
    server.initialize()
    message = json.dumps({"jsonrpc": "2.0", "id": 55, "method": "ping"}).encode()
    for i in range(0, len(message), 7):
        server.send_raw(message[i : i + 7], newline=False)
        time.sleep(0.01)
    server.send_raw(b"")
    assert server.wait_for(55, 10) == {"jsonrpc": "2.0", "id": 55, "result": {}}


def test_closing_stdin_shuts_down_and_stops_the_workers(server: RawServer) -> None:
    server.initialize()
    server.call_tool("execute_code", {"code": "1"})
    workers = child_pids(server.process.pid)
    assert workers, "expected a code worker process"
    assert server.close() == 0
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if alive(pid)], "workers outlived the server"


def test_a_killed_server_leaves_no_idle_worker_behind(server: RawServer) -> None:
    """SIGKILL skips every cleanup; an idle worker sees its channel close and exits by itself."""
    server.initialize()
    server.call_tool("execute_code", {"code": "1"})
    workers = child_pids(server.process.pid)
    assert workers
    server.kill()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if alive(pid)], "an orphaned worker kept running"


# ------------------------------------------------------- what JSON-RPC requires and the SDK drops

SDK_DROPS = (
    "mcp 2.3.0 drops frames it cannot parse or validate without a response (DEBUG 'transport yielded "
    "exception' / 'dropped a frame received before the first request'); JSON-RPC 2.0 section 5 requires "
    "an error response. Fix belongs in the SDK (or a stdin line filter in the stdio entry point)."
)


@pytest.mark.xfail(strict=True, reason=SDK_DROPS)
def test_a_parse_error_gets_error_32700_with_id_null(server: RawServer) -> None:
    server.initialize()
    for line in (b"hello", b'{"jsonrpc":"2.0","id":1,"method":"initi', b"\xff\xfe"):
        server.send_raw(line)
    replies = [m for m in server.drain(NO_ANSWER_WAIT) if m.get("id") is None and "error" in m]
    assert [r["error"]["code"] for r in replies] == [-32700] * 3, replies


@pytest.mark.xfail(strict=True, reason=SDK_DROPS)
def test_an_invalid_request_with_an_id_gets_an_error_response(server: RawServer) -> None:
    server.initialize()
    bad = [
        {"jsonrpc": "2.0", "id": 31, "method": 42},
        {"jsonrpc": "1.0", "id": 32, "method": "ping"},
        {"jsonrpc": "2.0", "id": 33, "method": "tools/list", "params": "x"},
    ]
    for message in bad:
        server.send(message)
    replies = {m.get("id"): m for m in server.drain(NO_ANSWER_WAIT)}
    for message in bad:
        reply = replies.get(message["id"])
        assert reply is not None and reply["error"]["code"] in (-32600, -32602), (message, reply)


@pytest.mark.xfail(
    strict=True,
    reason="mcp 2.3.0 parses frames with pydantic-core (jiter), which rejects a lone surrogate escape "
    "('\\ud800') as invalid JSON and drops the frame unanswered: the tool call hangs until the client's "
    "own timeout. JSON.stringify emits such escapes for a string cut inside an emoji. Fix belongs in "
    "the SDK (or a stdin line filter that re-encodes such frames with json.loads/dumps).",
)
def test_a_lone_surrogate_escape_in_a_tool_call_is_answered(server: RawServer) -> None:
    server.initialize()
    server.send_raw(
        b'{"jsonrpc":"2.0","id":41,"method":"tools/call",'
        b'"params":{"name":"execute_code","arguments":{"code":"x = \'\\ud83d\'"}}}'
    )
    assert server.wait_for(41, NO_ANSWER_WAIT) is not None
