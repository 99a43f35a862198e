"""Graph and template checks every definition passes before it is offered or run.

Checked at load time, so a user learns of them from ``llmc-mcp workflows validate`` or the list of
skipped files, not halfway through a workflow: unknown ``next`` targets, steps no path reaches,
steps from which no path reaches a ``complete`` step (a cycle without an exit, a dead end), templates
that do not parse or name a value no earlier step saves on every path to them, and ``requires`` that
name a domain, operation or argument that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable

from llmc_mcp.operations.workflows.definitions import Problem, Step, Workflow
from llmc_mcp.operations.workflows.templates import TemplateError, names, parse_ref

RESERVED = frozenset({"answer", "name"})
"""``answer`` is the submitted answer inside ``requires.args``; ``name`` is ``start``'s own parameter."""

ReportFn = Callable[[str | None, str], None]


def successors(workflow: Workflow, step: Step) -> list[str]:
    """Where a step may go next (unknown ids included, for the checks to report)."""
    if step.complete:
        return []
    if step.next is None:
        position = workflow.index(step.id)
        return [workflow.steps[position + 1].id] if position + 1 < len(workflow.steps) else []
    if isinstance(step.next, str):
        return [step.next]
    return [branch.goto for branch in step.next]


def check_workflow(workflow: Workflow, file: str) -> list[Problem]:
    problems: list[Problem] = []

    def report(step: str | None, problem: str) -> None:
        problems.append(Problem(file, step, problem))

    ids = [s.id for s in workflow.steps]
    for step_id in sorted({i for i in ids if ids.count(i) > 1}):
        report(step_id, "the id is used by more than one step")
    if problems:
        return problems
    inputs = {spec.name for spec in workflow.inputs}
    for name in sorted(inputs & RESERVED):
        report(None, f"input {name!r}: the name is reserved")
    _check_shape(workflow, report, inputs)
    known = set(ids)
    graph = {s.id: successors(workflow, s) for s in workflow.steps}
    for step in workflow.steps:
        for target in graph[step.id]:
            if target not in known:
                report(step.id, f"next: {target!r} is not a step of this workflow")
    if problems:
        return problems
    reachable = _reach(workflow.steps[0].id, graph)
    for step in workflow.steps:
        if step.id not in reachable:
            report(step.id, "unreachable: no path from the first step leads here")
    completes = {s.id for s in workflow.steps if s.complete}
    if not completes:
        report(None, "no step has 'complete: true', so the workflow can never finish")
    else:
        reverse: dict[str, list[str]] = {s: [] for s in ids}
        for source, targets in graph.items():
            for target in targets:
                reverse[target].append(source)
        finishing: set[str] = set()
        for end in completes:
            finishing |= _reach(end, reverse)
        for step in workflow.steps:
            if step.id in reachable and step.id not in finishing:
                cyclic = step.id in _reach_after(step.id, graph)
                report(
                    step.id,
                    "a cycle without an exit: no branch ever leads to a complete step"
                    if cyclic
                    else "a dead end: no path from here reaches a complete step",
                )
    if problems:
        return problems
    _check_names(workflow, graph, reachable, inputs, report)
    return problems


def _check_shape(workflow: Workflow, report: ReportFn, inputs: set[str]) -> None:
    for position, step in enumerate(workflow.steps):
        if step.complete and step.next is not None:
            report(step.id, "a complete step ends the workflow; it cannot also have 'next'")
        if not step.complete and step.next is None and position == len(workflow.steps) - 1:
            report(step.id, "the last step needs 'complete: true' or a 'next'")
        if isinstance(step.next, list):
            for i, branch in enumerate(step.next):
                last = i == len(step.next) - 1
                if last and branch.if_ is not None:
                    report(step.id, "next: the last branch must have no 'if' (where to go otherwise)")
                if not last and branch.if_ is None:
                    report(step.id, f"next: branch {i + 1} has no 'if', so the branches after it never run")
        if step.save is not None and step.save in inputs | RESERVED:
            report(step.id, f"save: {step.save!r} is an input or a reserved name")
        if step.foreach is not None and step.as_ in inputs | RESERVED:
            report(step.id, f"as: {step.as_!r} is an input or a reserved name")
        if step.requires is not None:
            _check_requirement(step, report)
        elif step.answer == "justification":
            report(step.id, "answer: a justification answer needs 'requires' (the decision it justifies)")


def _check_requirement(step: Step, report: ReportFn) -> None:
    from llmc_mcp.operations.catalog import find_operation
    from llmc_mcp.reflection.specs import DOMAINS

    requirement = step.requires
    assert requirement is not None
    if step.answer_kind != "justification":
        report(step.id, "answer: a step with 'requires' is answered with a justification")
    if requirement.domain not in DOMAINS:
        report(step.id, f"requires.domain: {requirement.domain!r} is not one of {', '.join(sorted(DOMAINS))}")
        return
    op = find_operation(requirement.operation)
    if op is None:
        report(step.id, f"requires.operation: no operation named {requirement.operation!r}")
        return
    if requirement.domain not in op.domains:
        asks = ", ".join(op.domains) or "no justification"
        report(step.id, f"requires: {op.qualname} asks for {asks}, never {requirement.domain!r}")
    for name in sorted(set(requirement.args) - set(op.signature.parameters)):
        report(step.id, f"requires.args: {name!r} is not a parameter of {op.qualname}")
    missing = [
        n for n, p in op.signature.parameters.items() if p.default is p.empty and n not in requirement.args
    ]
    if missing:
        report(step.id, f"requires.args: {op.qualname} needs {', '.join(missing)}")


def _check_names(
    workflow: Workflow, graph: dict[str, list[str]], reachable: set[str], inputs: set[str], report: ReportFn
) -> None:
    """Every template reads only inputs and values saved on every path to it (a must-analysis)."""
    everything = inputs | {s.save for s in workflow.steps if s.save}
    first = workflow.steps[0].id
    before: dict[str, set[str]] = {s: set(everything) for s in reachable}
    before[first] = set(inputs)
    changed = True
    while changed:
        changed = False
        for step in workflow.steps:
            if step.id not in reachable:
                continue
            after = before[step.id] | ({step.save} if step.save else set())
            for target in graph[step.id]:
                narrowed = before[target] & after if target != first else before[target]
                if narrowed != before[target]:
                    before[target] = narrowed
                    changed = True
    for step in workflow.steps:
        if step.id not in reachable:
            continue
        available = set(before[step.id])
        if step.foreach is not None:
            try:
                source = parse_ref(step.foreach)
            except TemplateError as exc:
                report(step.id, f"foreach: {exc}")
                continue
            if source.name not in available:
                report(
                    step.id, f"foreach: {source.name!r} is not saved by any earlier step on every path here"
                )
            available.add(step.as_)
        _check_template(step, "instruction", step.instruction, available, report)
        if step.requires is not None:
            for key, value in step.requires.args.items():
                if isinstance(value, str):
                    _check_template(step, f"requires.args.{key}", value, available | {"answer"}, report)
        if isinstance(step.next, list):
            saved = available | ({step.save} if step.save else set())
            for branch in step.next:
                if branch.if_ is not None:
                    _check_template(step, "next.if.value", branch.if_.value, saved, report)


def _check_template(step: Step, where: str, template: str, available: set[str], report: ReportFn) -> None:
    try:
        used = names(template)
    except TemplateError as exc:
        report(step.id, f"{where}: {exc}")
        return
    for name in sorted(used - available):
        report(step.id, f"{where}: '${{{name}}}' names a value no earlier step saves on every path here")


def _reach(start: str, graph: dict[str, list[str]]) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), []):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _reach_after(start: str, graph: dict[str, list[str]]) -> set[str]:
    """Steps reachable in one or more moves (so ``start`` is in it only on a cycle)."""
    found: set[str] = set()
    for target in graph.get(start, []):
        found |= _reach(target, graph)
    return found
