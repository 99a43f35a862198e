"""``llmc-mcp workflows list|show|validate``: the workflows a server would offer, for people.

``validate FILE...`` is what a user runs on their own YAML before putting it in
``<workspace>/.llmc/workflows/``: the same checks the server runs when it loads the folder, one line
per problem naming the file, the step and what is wrong; exit status 1 if any file fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from llmc_mcp.operations.workflows.definitions import DefinitionError
from llmc_mcp.operations.workflows.loading import builtin_workflows, load_catalog, load_file
from llmc_mcp.operations.workflows.validate import successors


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("workflows", help="List, show or validate guided workflows.")
    actions = parser.add_subparsers(dest="workflows_action", metavar="ACTION", required=True)
    for name, text in (
        ("list", "The workflows a server on this workspace offers, and user files it would skip."),
        ("show", "One workflow's inputs and steps."),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument(
            "--workspace", type=Path, default=None, help="Existing workspace (default: current dir)."
        )
        if name == "show":
            action.add_argument("name", help="The workflow's name, as list prints it.")
    validate = actions.add_parser("validate", help="Check workflow YAML files as the server would load them.")
    validate.add_argument("files", type=Path, nargs="+", help="Workflow definitions (*.yaml).")


def run(args: argparse.Namespace, workspace_root: Path | None) -> int:
    if args.workflows_action == "validate":
        return _validate(args.files)
    assert workspace_root is not None
    catalog = load_catalog(workspace_root / ".llmc" / "workflows")
    if args.workflows_action == "list":
        for workflow in catalog.workflows.values():
            origin = "built-in" if workflow.name in catalog.builtin else "workspace"
            inputs = ", ".join(spec.name for spec in workflow.inputs) or "no inputs"
            print(
                f"{workflow.name} ({origin}; {inputs}; {len(workflow.steps)} steps): {workflow.description}"
            )
        for problem in catalog.problems:
            print(f"skipped: {problem}")
        return 0
    workflow = catalog.workflows.get(args.name)
    if workflow is None:
        print(f"llmc-mcp: error: no workflow named {args.name!r}; 'llmc-mcp workflows list' names them.",
              file=sys.stderr)  # fmt: skip
        return 2
    print(f"{workflow.name}: {workflow.description}")
    for spec in workflow.inputs:
        print(f"  input {spec.name}: {spec.description}")
    for position, step in enumerate(workflow.steps, 1):
        extras = [f"answer {step.answer_kind}"]
        extras += [f"saves {step.save}"] if step.save else []
        extras += [f"once per item of {step.foreach}"] if step.foreach else []
        if step.requires is not None:
            extras.append(f"justifies {step.requires.domain} for {step.requires.operation}")
        targets = successors(workflow, step)
        extras.append("complete" if step.complete else f"then {' or '.join(targets)}")
        print(f"  {position}. {step.id} ({'; '.join(extras)})")
        for line in step.instruction.splitlines():
            print(f"       {line}")
    return 0


def _validate(files: list[Path]) -> int:
    builtin = set(builtin_workflows())
    failed = 0
    for path in files:
        try:
            workflow = load_file(path)
        except DefinitionError as exc:
            failed += 1
            for problem in exc.problems:
                where = f"{path}: step {problem.step!r}" if problem.step else str(path)
                print(f"{where}: {problem.problem}")
            continue
        if workflow.name in builtin:
            failed += 1
            print(f"{path}: the name {workflow.name!r} is a built-in workflow's; the server would skip it")
            continue
        print(f"{path}: ok ({workflow.name}, {len(workflow.steps)} steps)")
    return 1 if failed else 0
