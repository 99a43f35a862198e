"""Workflow definitions: the template language, and every kind of bad definition refused at load
time with the file, the step and the problem named."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from llmc_mcp.cli.main import main
from llmc_mcp.operations.workflows.definitions import DefinitionError
from llmc_mcp.operations.workflows.loading import builtin_workflows, load_catalog, parse_definition
from llmc_mcp.operations.workflows.templates import TemplateError, names, render, render_value

VALUES = {
    "parts": ["alpha", "beta", "gamma"],
    "crs": {"choice": {"method": "EPSG:6933"}},
    "rows": [{"name": "a", "tags": ["x", "y"]}, {"name": "b", "tags": []}],
    "n": 42,
}


def problems(yaml_text: str) -> list[str]:
    """Every problem of a definition, as 'step: problem' (or the problem alone)."""
    with pytest.raises(DefinitionError) as caught:
        parse_definition(textwrap.dedent(yaml_text), "mine.yaml")
    assert all(p.file == "mine.yaml" for p in caught.value.problems)
    return [f"{p.step}: {p.problem}" if p.step else p.problem for p in caught.value.problems]


GOOD = """
name: good
description: A valid two-step workflow.
inputs: [{name: topic, description: What to write about.}]
steps:
  - {id: ask, instruction: "Write about ${topic}.", save: draft}
  - {id: done, instruction: "Polish ${draft}.", complete: true}
"""


def test_a_reference_reads_indexes_and_fields() -> None:
    """Guards against indexes or fields read as literal text (the agent would see '${parts[1]}')."""
    assert render("${parts[1]} / ${crs.choice.method} / ${rows[0].tags[1]} / ${n}", VALUES) == (
        "beta / EPSG:6933 / y / 42"
    )


def test_foreach_repeats_its_body_per_item_and_nests() -> None:
    """Guards against a loop rendered once, or an inner loop not seeing the outer item."""
    template = "${foreach r in rows}${r.name}:${foreach t in r.tags}[${t}]${/foreach};${/foreach}"
    assert render(template, VALUES) == "a:[x][y];b:;"


def test_a_list_or_object_is_shown_as_json() -> None:
    """Guards against Python reprs ('{'a': 1}') in instructions an agent may copy into code."""
    assert render("${rows[1]}", VALUES) == '{"name": "b", "tags": []}'


def test_one_whole_reference_keeps_its_value_for_operation_arguments() -> None:
    """Guards against numbers turned into text before an operation's arguments are validated."""
    assert render_value("${n}", VALUES) == 42 and render_value("n=${n}", VALUES) == "n=42"


def test_an_index_past_the_end_names_the_list_and_its_length() -> None:
    """Guards against an IndexError (an internal error) instead of a message the user can act on."""
    with pytest.raises(TemplateError, match=r"parts is a list of 3, it has no item \[3\]"):
        render("${parts[3]}", VALUES)


def test_an_unsaved_name_is_a_clear_error_at_run_time() -> None:
    """Guards against an undefined name rendered as empty text."""
    with pytest.raises(TemplateError, match="no value named 'missing' has been saved"):
        render("${missing}", VALUES)


@pytest.mark.parametrize(
    "template", ["${__import__('os').system('x')}", "${parts[0] + 1}", "${n.__class__}", "${a()}"]
)
def test_nothing_in_a_template_is_evaluated(template: str) -> None:
    """Guards against a template language that runs code a workflow file carries."""
    with pytest.raises(TemplateError, match="is not a reference"):
        names(template)


def test_names_excludes_loop_variables() -> None:
    """Guards against a loop variable reported as a value no step saves."""
    assert names("${foreach p in parts}${p} of ${n}${/foreach}") == {"parts", "n"}


def test_every_builtin_workflow_validates() -> None:
    """Guards against a shipped definition broken by a renamed operation or domain."""
    assert sorted(builtin_workflows()) == [
        "area_statistics",
        "chain_of_thought",
        "delivery_format",
        "watershed_delineation",
    ]


def test_bad_yaml_names_the_line() -> None:
    """Guards against a parser traceback instead of where the file is broken."""
    assert problems("name: x\nsteps: [\n  - id: a\n") == [
        "bad YAML: expected the node content, but found '-' at line 3, column 3"
    ]


def test_yaml_tags_that_build_objects_are_refused() -> None:
    """Guards against yaml.load: a definition must not construct Python objects."""
    found = problems("name: !!python/object/apply:os.system ['true']\ndescription: x\nsteps: []\n")
    assert len(found) == 1 and found[0].startswith("bad YAML: could not determine a constructor")


def test_an_unknown_key_is_named_with_its_step() -> None:
    """Guards against a misspelt key ('instrucion', 'requries') silently ignored."""
    found = problems(GOOD.replace("save: draft}", "save: draft, requries: {domain: crs_datum}}"))
    assert found == ["ask: requries: unknown key"]


def test_an_unknown_next_target_is_named() -> None:
    """Guards against a run that fails mid-way at a step that does not exist."""
    found = problems(GOOD.replace("save: draft}", "save: draft, next: polish}"))
    assert found == ["ask: next: 'polish' is not a step of this workflow"]


def test_an_unreachable_step_is_named() -> None:
    """Guards against steps the author believes run but never can."""
    text = GOOD.replace("save: draft}", "save: draft, next: done}").replace(
        "  - {id: done", "  - {id: orphan, instruction: never, next: done}\n  - {id: done"
    )
    assert problems(text) == ["orphan: unreachable: no path from the first step leads here"]


def test_a_cycle_without_an_exit_is_named() -> None:
    """Guards against a workflow that can never complete once it enters a loop."""
    text = """
    name: loop
    description: Two steps that only lead to each other.
    steps:
      - {id: start, instruction: Go., next: ping}
      - {id: ping, instruction: Ping., next: pong}
      - {id: pong, instruction: Pong., next: ping}
      - {id: end, instruction: End., complete: true}
    """
    found = problems(text)
    assert "ping: a cycle without an exit: no branch ever leads to a complete step" in found
    assert "pong: a cycle without an exit: no branch ever leads to a complete step" in found


def test_a_loop_with_a_conditional_exit_is_valid() -> None:
    """Guards against refusing a revise-until-good loop that has a way out."""
    text = """
    name: revise
    description: Revise until the reviewer says done.
    steps:
      - id: draft
        instruction: Draft.
        save: verdict
        next:
          - {if: {value: "${verdict}", equals: done}, goto: finish}
          - {goto: draft}
      - {id: finish, instruction: "Final: ${verdict}", complete: true}
    """
    assert parse_definition(textwrap.dedent(text), "revise.yaml").name == "revise"


def test_a_template_naming_a_value_saved_on_one_branch_only_is_named() -> None:
    """Guards against a run-time failure on the path that skipped the step saving the value."""
    text = """
    name: branchy
    description: The note is saved only when the check says so.
    steps:
      - id: check
        instruction: Check.
        save: result
        next:
          - {if: {value: "${result}", equals: "yes"}, goto: note}
          - {goto: finish}
      - {id: note, instruction: Note., save: note}
      - {id: finish, instruction: "Use ${note}.", complete: true}
    """
    assert problems(text) == [
        "finish: instruction: '${note}' names a value no earlier step saves on every path here"
    ]


def test_a_malformed_template_is_named() -> None:
    """Guards against a template error found only when an agent reaches the step."""
    text = GOOD.replace("Polish ${draft}.", "${foreach d in draft}${d}")
    assert problems(text) == ["done: instruction: '${foreach d in ...}' is never closed with '${/foreach}'"]


def test_requires_must_name_a_domain_the_operation_asks_for() -> None:
    """Guards against a justification stored in a domain the operation never looks up (no cache hit)."""
    text = GOOD.replace(
        "save: draft}",
        "save: draft, requires: {domain: hydrology, operation: raster.reproject, "
        "args: {src: a.tif, dst: b.tif, dst_crs: '${answer.choice.method}', colour: red}}}",
    )
    assert problems(text) == [
        "ask: requires: raster.reproject asks for crs_datum, resampling, format_selection, never 'hydrology'",
        "ask: requires.args: 'colour' is not a parameter of raster.reproject",
    ]


def test_requires_with_an_unknown_domain_is_named() -> None:
    """Guards against a domain typo passing validation and failing at the first submission."""
    text = GOOD.replace(
        "save: draft}", "save: draft, requires: {domain: crs, operation: raster.reproject, args: {}}}"
    )
    assert problems(text) == [
        "ask: requires.domain: 'crs' is not one of aggregation, crs_datum, format_selection, hydrology, "
        "resampling"
    ]


def test_a_bad_user_file_is_reported_and_skipped_while_good_ones_load(tmp_path: Path) -> None:
    """Guards against one broken user file stopping the server, or hiding every other workflow."""
    folder = tmp_path / ".llmc" / "workflows"
    folder.mkdir(parents=True)
    (folder / "good.yaml").write_text(textwrap.dedent(GOOD))
    (folder / "bad.yaml").write_text(
        textwrap.dedent(GOOD).replace("name: good", "name: bad").replace("${draft}", "${drat}")
    )
    (folder / "clash.yaml").write_text(textwrap.dedent(GOOD).replace("name: good", "name: chain_of_thought"))
    catalog = load_catalog(folder)
    assert "good" in catalog.workflows and "bad" not in catalog.workflows
    assert [str(p) for p in catalog.problems] == [
        "bad.yaml: step 'done': instruction: '${drat}' names a value no earlier step saves on every "
        "path here",
        "clash.yaml: the name 'chain_of_thought' is taken by a built-in workflow",
    ]


def test_cli_validate_reports_each_problem_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Guards against a validate command that passes a file the server would skip."""
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(textwrap.dedent(GOOD))
    bad.write_text(textwrap.dedent(GOOD).replace("save: draft}", "save: draft, next: nowhere}"))
    assert main(["workflows", "validate", str(good)]) == 0
    assert main(["workflows", "validate", str(good), str(bad)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        f"{good}: ok (good, 2 steps)",
        f"{bad}: step 'ask': next: 'nowhere' is not a step of this workflow",
    ]


def test_cli_list_and_show_read_the_workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Guards against the command line offering other workflows than a server on the workspace."""
    folder = tmp_path / ".llmc" / "workflows"
    folder.mkdir(parents=True)
    (folder / "good.yaml").write_text(textwrap.dedent(GOOD))
    assert main(["workflows", "list", "--workspace", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "good (workspace; topic; 2 steps): A valid two-step workflow." in listed
    assert "chain_of_thought (built-in; problem; 3 steps)" in listed
    assert main(["workflows", "show", "good", "--workspace", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert "  1. ask (answer text; saves draft; then done)" in shown
    assert "  2. done (answer text; complete)" in shown
