"""Where a workflow run stands and how it moves from step to step.

The current step (refusing an answer for another), the values a step's templates see, entering a
step (a foreach needs items), keeping an answer (one per item of a foreach) and choosing the next step
by its branches. These change only the :class:`WorkflowState` they are given; :mod:`.engine` checks
answers, saves the state and writes what the client sees.
"""

from __future__ import annotations

from typing import Any

from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations.workflows.definitions import Step, Workflow
from llmc_mcp.operations.workflows.state import WorkflowState
from llmc_mcp.operations.workflows.templates import (
    Budget,
    TemplateError,
    lookup,
    parse_ref,
    render,
    render_value,
)
from llmc_mcp.operations.workflows.validate import successors


def current_step(workflow: Workflow, state: WorkflowState, step: str | None) -> Step:
    """The step the run waits for; refused when the run is complete or ``step`` names another."""
    if state.complete or state.step is None:
        raise InvalidArgument(
            f"The workflow {workflow.name} is already complete; it takes no more answers.",
            fix="Read its results with workflows.state(state_id), or start a new run.",
        )
    current = workflow.step(state.step)
    if step is not None and step != current.id:
        done = step in {s.id for s in workflow.steps}
        raise InvalidArgument(
            f"Out of order: the answer is for step {str(step)[:64]!r}, but the workflow waits for step "
            f"{current.id!r}" + ("." if done else f" ({str(step)[:64]!r} is no step of {workflow.name})."),
            fix=f"Answer step {current.id!r} (workflows.state shows its instruction). Nothing was saved.",
        )
    return current


def step_values(state: WorkflowState, step: Step) -> dict[str, Any]:
    """What ``step``'s templates see: the inputs, the saved answers and, in a foreach, the item."""
    values: dict[str, Any] = {**state.inputs, **state.saved}
    items = step_items(state, step)
    if items is not None and state.item < len(items):
        values[step.as_] = items[state.item]
    return values


def step_items(state: WorkflowState, step: Step) -> list[Any] | None:
    """The items a foreach step is asked for, one at a time; None for a step asked once."""
    if step.foreach is None:
        return None
    items = lookup(parse_ref(step.foreach), {**state.inputs, **state.saved})
    return items if isinstance(items, list) else None


def requirement_args(step: Step, values: dict[str, Any], answer: Any, budget: Budget) -> dict[str, Any]:
    """The arguments of the operation a ``requires`` step's justification is scoped by, for ``answer``."""
    assert step.requires is not None
    scope = {**values, "answer": answer}
    return {name: render_value(value, scope, budget) for name, value in step.requires.args.items()}


def enter_step(state: WorkflowState, step: Step) -> list[str]:
    """Make ``step`` the current one; problems if it cannot be asked (its foreach has no items)."""
    state.step, state.item, state.answers = step.id, 0, []
    if step.foreach is None:
        return []
    try:
        items = lookup(parse_ref(step.foreach), {**state.inputs, **state.saved})
    except TemplateError as exc:
        return [f"step {step.id!r} cannot be asked: {exc}"]
    if not isinstance(items, list) or not items:
        shown = "an empty list" if isinstance(items, list) else f"not a list ({type(items).__name__})"
        return [f"step {step.id!r} is asked once per item of {step.foreach}, which is {shown}"]
    return []


def advance(workflow: Workflow, state: WorkflowState, step: Step, answer: Any, budget: Budget) -> list[str]:
    """Keep ``answer`` in ``state`` and move on; problems (state then unusable) if it cannot go on."""
    items = step_items(state, step)
    if items is not None:
        state.answers.append(answer)
        state.item += 1
        if state.item < len(items):
            return []
        answer = list(state.answers)
    if step.save is not None:
        state.saved[step.save] = answer
    if step.complete:
        state.complete, state.step, state.item, state.answers = True, None, 0, []
        return []
    target = _choose(workflow, step, {**state.inputs, **state.saved}, budget)
    if isinstance(target, list):
        return target
    return enter_step(state, workflow.step(target))


def _choose(workflow: Workflow, step: Step, values: dict[str, Any], budget: Budget) -> str | list[str]:
    if not isinstance(step.next, list):
        return successors(workflow, step)[0]
    for branch in step.next:
        if branch.if_ is None:
            return branch.goto
        try:
            rendered = render(branch.if_.value, values, budget)
        except TemplateError as exc:
            return [f"the next step cannot be chosen: {exc}"]
        if branch.if_.holds(rendered):
            return branch.goto
    return [f"step {step.id!r}: no branch applies"]  # validation requires a default branch
