"""Hostile workflow files and states: the third review's workflow attacks, each bounded or refused.

A workflow definition in ``.llmc/workflows/`` is written by whoever can write the workspace (a worker
can), and so is every state file in ``.llmc/workflow-state/``. None of them may make the server work
without end, stop other workflows from loading, spend disk past the quotas and the reserve, roll a
run back or continue one run from another's file; and nothing a client answers is kept unbounded.
The engine is driven in-process (the server runs the same engine in a thread for each call).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from llmc_mcp.config import Quota, Settings
from llmc_mcp.errors import LlmcError, NotFound
from llmc_mcp.operations.workflows import engine as engine_module
from llmc_mcp.operations.workflows import state as state_module
from llmc_mcp.operations.workflows.engine import Engine
from llmc_mcp.operations.workflows.templates import TemplateError, render
from llmc_mcp.outputs import OutputLedger
from llmc_mcp.reflection.gate import Gate
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.server.app import build_server
from llmc_mcp.sessions import principal
from llmc_mcp.workspace import Workspace
from tests.mcp_helpers import structured

ALICE = principal("http-alice")
GUARD_SECONDS = 20
"""Only a guard against a hang: a call that has not returned by then failed the test."""


def engine_for(workspace: Workspace, quota: Quota | None = None) -> Engine:
    store = JustificationStore(workspace.preflight_dir)
    gate = Gate(store, PromptLibrary.default(), next_action="")
    outputs = OutputLedger(workspace, quota or Quota(), signer=store)
    return Engine(workspace, gate, face="code", ttl_seconds=3600, outputs=outputs)


def user_file(workspace: Workspace, name: str, text: str) -> None:
    folder = workspace.root / ".llmc" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def skipped(engine: Engine) -> dict[str, str]:
    return {p.file: p.problem for p in engine.list().skipped}


TRIPLE = "${foreach a in xs}${foreach b in xs}${foreach c in xs}${/foreach}${/foreach}${/foreach}"
LOOPS = f"""name: loops
description: Lists every triple of items.
steps:
  - {{id: items, instruction: List the items., answer: any, save: xs}}
  - {{id: triples, instruction: "{TRIPLE}Done?", complete: true}}
"""

ANY = """name: anything
description: Takes any answer.
steps:
  - {id: ask, instruction: Say anything., answer: any, save: said}
  - {id: done, instruction: "You said ${said}.", complete: true}
"""


def test_foreach_loops_nested_past_the_bound_are_refused_when_the_definition_loads(
    workspace: Workspace,
) -> None:
    """Guards against six loops nested over a 50-item answer (50**6 turns) being accepted, to run
    ``workflows.submit`` for ever: the depth is refused at load, naming the bound."""
    nested = "".join(f"${{foreach x{i} in xs}}" for i in range(6)) + "${/foreach}" * 6
    user_file(
        workspace,
        "deep.yaml",
        "name: deep\ndescription: Nested loops.\nsteps:\n"
        "  - {id: items, instruction: List., answer: any, save: xs}\n"
        f"  - {{id: show, instruction: '{nested}', complete: true}}\n",
    )
    engine = engine_for(workspace)
    assert "foreach loops nest more than 3 deep" in skipped(engine)["deep.yaml"]
    assert "deep" not in {w.name for w in engine.list().workflows}


def test_a_render_stops_at_its_step_bound_even_when_it_writes_nothing() -> None:
    """Guards against a size check as the only bound: loops with empty bodies write nothing, so the
    216,000 turns of three loops over 60 items ran past every size limit unnoticed."""
    with pytest.raises(TemplateError, match="over 100000 substitutions and loop turns"):
        render(TRIPLE, {"xs": list(range(60))})


def test_an_answer_that_would_make_the_next_step_loop_too_long_is_refused_and_nothing_saved(
    workspace: Workspace,
) -> None:
    """Guards against the engine rendering a hostile step until the worker's timeout (which cannot
    stop a server thread): the submit is refused with the bound, the step stands."""
    user_file(workspace, "loops.yaml", LOOPS)
    engine = engine_for(workspace)
    run = engine.start("loops", {}, ALICE)
    with pytest.raises(LlmcError, match="substitutions and loop turns") as caught:
        engine.submit(run.state_id, list(range(60)), "items", ALICE)
    assert caught.value.kind == "answer_invalid"
    assert engine.state(run.state_id, ALICE).step == "items"


BILLION_LAUGHS = """name: laughs
description: Aliases to aliases inside requires.args.
steps:
  - id: pick
    instruction: Pick.
    requires:
      domain: crs_datum
      operation: raster.reproject
      args:
        src: a.tif
        dst: b.tif
        dst_crs: "${answer.choice.method}"
        resampling: [&a [lol, lol, lol], &b [*a, *a, *a], &c [*b, *b, *b], [*c, *c, *c]]
    complete: true
"""


def test_yaml_anchors_and_aliases_are_refused_when_a_definition_loads(workspace: Workspace) -> None:
    """Guards against an 878-byte billion-laughs file passing every load check and then expanding to
    gigabytes when a run freezes its definition: aliases are refused where the parser meets them."""
    user_file(workspace, "laughs.yaml", BILLION_LAUGHS)
    engine = engine_for(workspace)
    assert "anchors and aliases" in skipped(engine)["laughs.yaml"]


def test_a_file_nested_thousands_deep_is_skipped_and_every_other_workflow_still_loads(
    workspace: Workspace,
) -> None:
    """Guards against RecursionError escaping the loader: list, describe and start of a built-in
    failed for everyone because of one 10 KB file nested 5,000 deep."""
    user_file(workspace, "deep.yaml", "name: x\nsteps: " + "[" * 5000 + "]" * 5000 + "\n")
    user_file(workspace, "anything.yaml", ANY)
    engine = engine_for(workspace)
    assert "nested more than 32 levels deep" in skipped(engine)["deep.yaml"]
    assert {"anything", "chain_of_thought"} <= {w.name for w in engine.list().workflows}
    assert engine.describe("anything").name == "anything"
    assert engine.start("chain_of_thought", {"problem": "p"}, ALICE).step == "decompose"


def test_a_file_that_raises_anything_while_loading_is_skipped_with_the_reason(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against an exception nobody foresaw (here a MemoryError from the checks) escaping the
    catalog: the file is reported, and the rest of the folder is offered as before."""
    from llmc_mcp.operations.workflows import loading

    real = loading.check_workflow

    def failing(workflow: Any, file: str) -> Any:
        if file == "bad.yaml":
            raise MemoryError("simulated")
        return real(workflow, file)

    monkeypatch.setattr(loading, "check_workflow", failing)
    user_file(workspace, "bad.yaml", ANY.replace("anything", "bad"))
    user_file(workspace, "anything.yaml", ANY)
    engine = engine_for(workspace)
    assert skipped(engine)["bad.yaml"] == "could not be loaded (MemoryError: simulated)"
    assert "anything" in {w.name for w in engine.list().workflows}


def test_the_folder_is_read_up_to_a_total_and_unchanged_files_are_not_parsed_again(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against every list, describe and start parsing the whole folder again: 200 files of
    256 KB took the pure-Python parser seconds per call. Files past the total are reported unread,
    and a second call parses nothing that did not change."""
    from llmc_mcp.operations.workflows import loading

    for n in range(3):
        user_file(workspace, f"w{n}.yaml", ANY.replace("anything", f"w{n}"))
    size = (workspace.root / ".llmc" / "workflows" / "w0.yaml").stat().st_size
    monkeypatch.setattr(loading, "MAX_USER_BYTES", 2 * size)
    # The shipped definitions are parsed once per process, by whichever test asks first; read them
    # now so that only the folder's files are counted, in any order of tests and processes.
    loading.builtin_workflows()
    parsed: list[str] = []
    real = loading.parse_definition

    def counting(text: str, file: str) -> Any:
        parsed.append(file)
        return real(text, file)

    monkeypatch.setattr(loading, "parse_definition", counting)
    engine = engine_for(workspace)
    first = engine.list()
    second = engine.list()
    assert [w.name for w in first.workflows if not w.builtin] == ["w0", "w1"]
    assert [(p.file, p.problem) for p in second.skipped] == [
        ("w2.yaml", f"not read: the folder's files take more than {2 * size} bytes in all")
    ]
    assert parsed == ["w0.yaml", "w1.yaml"]


def test_a_file_with_hundreds_of_problems_lists_twenty_and_a_count(workspace: Workspace) -> None:
    """Guards against a list answer of megabytes: each problem of a planted file (here 100 steps with
    two unknown keys each) came back in every workflows.list."""
    steps = "".join(f"  - {{id: s{i}, instruction: x, colour: red, shade: dark}}\n" for i in range(100))
    user_file(workspace, "noisy.yaml", f"name: noisy\ndescription: Noisy.\nsteps:\n{steps}")
    problems = [p.problem for p in engine_for(workspace).list().skipped]
    assert len(problems) == 21
    assert problems[-1] == "and 180 more problems (llmc-mcp workflows validate FILE lists them all)"


def state_file(engine: Engine) -> Path:
    (path,) = engine.states.folder.glob("*.json")
    return path


def test_an_earlier_copy_of_a_state_file_put_back_is_refused(workspace: Workspace) -> None:
    """Guards against rolling a run back a step by restoring its earlier (genuinely signed) file."""
    engine = engine_for(workspace)
    run = engine.start("chain_of_thought", {"problem": "p"}, ALICE)
    path = state_file(engine)
    earlier = path.read_bytes()
    engine.submit(run.state_id, ["first part", "second part"], "decompose", ALICE)
    path.write_bytes(earlier)
    with pytest.raises(LlmcError, match="is an earlier copy") as caught:
        engine.state(run.state_id, ALICE)
    assert caught.value.kind == "refused"


def test_one_runs_state_file_copied_over_anothers_is_not_a_state(workspace: Workspace) -> None:
    """Guards against a run continuing another: the signature covers the run's id, so a file signed
    for run A is no state of run B."""
    engine = engine_for(workspace)
    first = engine.start("chain_of_thought", {"problem": "first"}, ALICE)
    second = engine.start("chain_of_thought", {"problem": "second"}, ALICE)
    engine.submit(first.state_id, ["a part", "another part"], "decompose", ALICE)
    paths = {p.read_bytes(): p for p in engine.states.folder.glob("*.json")}
    second_path = next(p for p in paths.values() if b'"second"' in p.read_bytes())
    first_path = next(p for p in paths.values() if p != second_path)
    shutil.copyfile(first_path, second_path)
    with pytest.raises(NotFound):
        engine.state(second.state_id, ALICE)


def test_workflow_states_are_charged_to_the_session_quota(workspace: Workspace) -> None:
    """Guards against states as free disk: answers of allowed sizes filled a workspace while the
    1 GiB-per-principal bound was far away; a session's states count against --quota-session-mb."""
    engine = engine_for(workspace, Quota(session_bytes=40_000))
    with pytest.raises(LlmcError, match=r"--quota-session-mb") as caught:
        for _ in range(100):  # each state holds the chain_of_thought definition, about 3 KB
            engine.start("chain_of_thought", {"problem": "p" * 3000}, ALICE)
    assert caught.value.kind == "quota_exceeded"


def test_a_sessions_workflow_states_leave_its_outputs_less_of_the_quota(workspace: Workspace) -> None:
    """Guards against states and outputs each filling a quota of their own (twice the bytes allowed):
    the grant of an output is the session's quota less its outputs and its workflow states."""
    quota = Quota(session_bytes=40_000)
    engine = engine_for(workspace, quota)
    for _ in range(3):
        engine.start("chain_of_thought", {"problem": "p" * 3000}, ALICE)
    states = sum(p.stat().st_size for p in engine.states.folder.glob("*.json"))
    outputs = engine.states.outputs
    assert outputs is not None
    grant = outputs.begin("http-alice", "out.tif")
    outputs.abort("http-alice", grant.token)
    assert grant.max_bytes == quota.session_bytes - states
    assert "workflow states" in grant.bound


def test_every_new_http_session_shares_the_workspace_quota(workspace: Workspace) -> None:
    """Guards against the per-principal bound as the only one: every HTTP session is a new principal,
    so a client opening sessions in a loop met no limit at all; the workspace's quota holds."""
    engine = engine_for(workspace, Quota(workspace_bytes=40_000))
    with pytest.raises(LlmcError, match=r"--quota-workspace-mb") as caught:
        for n in range(100):
            engine.start("chain_of_thought", {"problem": "p" * 3000}, principal(f"http-{n}"))
    assert caught.value.kind == "quota_exceeded"


def test_workflow_states_honour_the_disk_reserve(workspace: Workspace) -> None:
    """Guards against states eating the space kept free for the server's records (--disk-reserve-mb):
    a neighbour's output was refused after one session's states filled the disk past it."""
    disk = os.statvfs(workspace.root)
    free = disk.f_bavail * disk.f_frsize
    engine = engine_for(workspace, Quota(reserve_bytes=free + 2**30))
    with pytest.raises(LlmcError, match=r"--disk-reserve-mb") as caught:
        engine.start("chain_of_thought", {"problem": "p"}, ALICE)
    assert caught.value.kind == "quota_exceeded"
    assert not list(engine.states.folder.glob("*.json"))


def in_thread(call: Any) -> Any:
    """``call()`` in a thread, failing the test if it has not returned within the guard."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD_SECONDS)
    assert not thread.is_alive(), f"the call did not return within {GUARD_SECONDS} s"
    return outcome


def test_a_state_lock_held_by_another_process_refuses_the_call_instead_of_hanging(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against every session's workflow calls waiting for ever on the folder's lock (a stuck
    call, or a worker that flocks it: workers can open the workspace): the wait is bounded."""
    engine = engine_for(workspace)
    run = engine.start("chain_of_thought", {"problem": "p"}, ALICE)
    monkeypatch.setattr(state_module, "LOCK_SECONDS", 0.2)
    fd = os.open(engine.states.folder / ".lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        outcome = in_thread(lambda: engine.submit(run.state_id, ["a part", "b part"], "decompose", ALICE))
    finally:
        os.close(fd)
    assert outcome["error"].kind == "busy" and "locked by another call" in outcome["error"].message


def test_a_submit_renders_without_holding_the_state_lock(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against rendering under the state folder's lock: a slow render then stalled every
    other session's workflow calls. The lock is held only to check and write the state."""
    engine = engine_for(workspace)
    run = engine.start("chain_of_thought", {"problem": "p"}, ALICE)
    held = threading.Event()
    locked = engine.states.locked

    def tracking(*args: Any, **kwargs: Any) -> Any:
        held.set()
        try:
            with locked(*args, **kwargs):
                yield
        finally:
            held.clear()

    monkeypatch.setattr(engine.states, "locked", contextlib.contextmanager(tracking))
    rendered_while_locked = []
    real = engine_module.render

    def watching(*args: Any, **kwargs: Any) -> str:
        rendered_while_locked.append(held.is_set())
        return real(*args, **kwargs)

    monkeypatch.setattr(engine_module, "render", watching)
    engine.submit(run.state_id, ["a part", "b part"], "decompose", ALICE)
    assert rendered_while_locked and not any(rendered_while_locked)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("clear \x1b[2J screen", r"U\+001B"),
        ("reads \u202eesrever", r"U\+202E"),
        ("half a pair \ud800", r"U\+D800"),
        ({"k\x00": "v"}, "a key is not plain text"),
    ],
)
def test_an_answer_with_text_no_record_may_hold_is_refused_and_nothing_saved(
    workspace: Workspace, answer: Any, problem: str
) -> None:
    """Guards against a client's answer kept as it came: terminal escapes, bidirectional overrides and
    lone surrogates (which cannot be written as UTF-8, so the save failed as an internal error) end
    up in states and in what later steps show."""
    user_file(workspace, "anything.yaml", ANY)
    engine = engine_for(workspace)
    run = engine.start("anything", {}, ALICE)
    with pytest.raises(LlmcError, match=problem) as caught:
        engine.submit(run.state_id, answer, "ask", ALICE)
    assert caught.value.kind == "answer_invalid"
    assert engine.state(run.state_id, ALICE).step == "ask"


def test_an_answer_nested_past_the_bound_is_refused(workspace: Workspace) -> None:
    """Guards against structure without limit (a list 500 deep is a few KB) kept in a state that every
    later call parses and renders."""
    user_file(workspace, "anything.yaml", ANY)
    engine = engine_for(workspace)
    run = engine.start("anything", {}, ALICE)
    deep: Any = "bottom"
    for _ in range(40):
        deep = [deep]
    with pytest.raises(LlmcError, match="nested more than 16 lists or objects deep"):
        engine.submit(run.state_id, deep, "ask", ALICE)


def test_an_input_with_a_control_character_is_refused(workspace: Workspace) -> None:
    """Guards against start inputs (shown in every later instruction) kept with terminal escapes."""
    engine = engine_for(workspace)
    with pytest.raises(LlmcError, match=r"U\+001B") as caught:
        engine.start("chain_of_thought", {"problem": "p\x1b]0;owned\x07"}, ALICE)
    assert caught.value.kind == "invalid_argument"


@pytest.mark.anyio
async def test_the_server_lists_and_runs_workflows_beside_every_hostile_definition(
    workspace: Workspace,
) -> None:
    """Guards against one planted file costing every session its workflows: through the server, a
    file nested 5,000 deep, a billion-laughs file and six nested loops are listed as skipped, and a
    built-in still starts and takes an answer."""
    user_file(workspace, "deep.yaml", "name: x\nsteps: " + "[" * 5000 + "]" * 5000 + "\n")
    user_file(workspace, "laughs.yaml", BILLION_LAUGHS)
    nested = "".join(f"${{foreach x{i} in xs}}" for i in range(6)) + "${/foreach}" * 6
    user_file(
        workspace,
        "loops.yaml",
        "name: loops\ndescription: Nested loops.\nsteps:\n"
        "  - {id: items, instruction: List., answer: any, save: xs}\n"
        f"  - {{id: show, instruction: '{nested}', complete: true}}\n",
    )
    async with Client(build_server(Settings(mode="classic", workspace=workspace.root))) as client:
        listed = structured(await client.call_tool("workflow_list", {}))
        started = structured(
            await client.call_tool(
                "workflow_start", {"name": "chain_of_thought", "inputs": [{"name": "problem", "value": "p"}]}
            )
        )
        answered = structured(
            await client.call_tool(
                "workflow_submit",
                {"state_id": started["state_id"], "step": "decompose", "answer": ["a", "b"]},
            )
        )
    assert sorted(p["file"] for p in listed["skipped"]) == ["deep.yaml", "laughs.yaml", "loops.yaml"]
    assert answered["step"] == "analyse"


def test_a_fifo_under_a_state_files_name_is_not_read_and_the_sweep_does_not_hang(
    workspace: Workspace,
) -> None:
    """Guards against a state read that blocks for ever: a FIFO (anyone who can write the workspace can
    make one) under a run's name, or beside the states, hung ``load`` and the start-up sweep, which
    holds the folder's lock. It is no state: not found, and swept."""
    engine = engine_for(workspace)
    run = engine.start("chain_of_thought", {"problem": "p"}, ALICE)
    path = state_file(engine)
    path.unlink()
    os.mkfifo(path)
    os.mkfifo(engine.states.folder / "planted.json")
    outcome = in_thread(lambda: engine.state(run.state_id, ALICE))
    assert isinstance(outcome["error"], NotFound)
    assert in_thread(engine.states.sweep)["value"] == 2
    assert list(engine.states.folder.glob("*.json")) == []
