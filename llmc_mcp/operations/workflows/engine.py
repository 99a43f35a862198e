"""Running workflows: start, submit, state. Trusted server code; states live in :mod:`.state`.

The engine hands out one step at a time and keeps everything else: the saved answers, where the run
stands, and the definition as it was when the run started (a user editing the file meanwhile does not
pull the floor from under a run). A submitted answer is checked completely before anything is kept:
its kind, the justification of a ``requires`` step (exactly as the gate validates one, tied to the
decision the later operation will make), and that the run can go on with it (a ``foreach`` over it
needs a list, a branch condition must render). Every problem comes back at once and the step stands;
only an answer that passes is saved, its justification stored as the gate stores one, and the run
advanced. How a run moves from step to step (foreach items, branches) is :mod:`.steps`.

Every call is bounded for the session that makes it: its renders share one :class:`Budget` (steps and
a :data:`CALL_SECONDS` deadline), it works on the state it read without holding any lock, and takes the
state folder's lock only to check that nobody saved the run meanwhile and write it (:mod:`.state`).
The server runs each call in a thread while the session's worker waits on it, wall clock running, so
the time is the session's. What a client sends (answers, inputs) is bounded in length, nesting and
characters before anything is kept.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from llmc_mcp.errors import InvalidArgument, LlmcError, NotFound, RecordExists, Refused
from llmc_mcp.operations.workflows.answers import (
    ANSWER_WORDS,
    JUSTIFICATION_SHAPE,
    AnswerInvalid,
    answer_problems,
    check_inputs,
    justification_errors,
)
from llmc_mcp.operations.workflows.definitions import Step, Workflow
from llmc_mcp.operations.workflows.loading import Catalog, ParsedFiles, load_catalog
from llmc_mcp.operations.workflows.models import (
    ToolCall,
    WorkflowDescription,
    WorkflowInput,
    WorkflowList,
    WorkflowProblem,
    WorkflowProgress,
    WorkflowStepInfo,
    WorkflowSummary,
)
from llmc_mcp.operations.workflows.state import StateStore, WorkflowState
from llmc_mcp.operations.workflows.steps import (
    advance,
    current_step,
    enter_step,
    requirement_args,
    step_items,
    step_values,
)
from llmc_mcp.operations.workflows.templates import (
    Budget,
    TemplateError,
    render,
)
from llmc_mcp.operations.workflows.validate import successors
from llmc_mcp.reflection.gate import Gate
from llmc_mcp.reflection.schema import validate_justification
from llmc_mcp.reflection.specs import check_facts
from llmc_mcp.reflection.store import Record
from llmc_mcp.workspace import Workspace

if TYPE_CHECKING:
    from llmc_mcp.outputs import OutputLedger

Face = Literal["code", "classic"]
CALL_SECONDS = 10.0
"""The deadline of the rendering one engine call does (normally milliseconds; bounded by steps too)."""


class Engine:
    """Workflows of one workspace, run for one face (whose calls ``next_action`` spells)."""

    def __init__(
        self,
        workspace: Workspace,
        gate: Gate,
        *,
        face: Face,
        ttl_seconds: float,
        min_confidence: Literal["low", "medium", "high"] = "low",
        outputs: OutputLedger | None = None,
    ):
        """``outputs``: the workspace's output ledger, whose quotas states are charged to with its outputs."""
        self.workspace = workspace
        self.gate = gate
        self.face = face
        self.min_confidence = min_confidence
        self.states = StateStore(
            workspace.root / ".llmc" / "workflow-state", gate.store, ttl_seconds, outputs=outputs
        )
        self.user_dir = workspace.root / ".llmc" / "workflows"
        self._parsed = ParsedFiles()

    def catalog(self) -> Catalog:
        """Read on every call: a user adds or fixes a file and the next list shows it, no restart
        (a file unchanged since the last call is not parsed again)."""
        return load_catalog(self.user_dir, self._parsed)

    def list(self) -> WorkflowList:
        catalog = self.catalog()
        return WorkflowList(
            workflows=[_summary(w, w.name in catalog.builtin) for w in catalog.workflows.values()],
            skipped=[WorkflowProblem(file=p.file, step=p.step, problem=p.problem) for p in catalog.problems],
        )

    def describe(self, name: str) -> WorkflowDescription:
        catalog = self.catalog()
        workflow = _find(catalog, name)
        return WorkflowDescription(
            name=workflow.name,
            description=workflow.description,
            builtin=workflow.name in catalog.builtin,
            inputs=_inputs(workflow),
            steps=[_step_info(workflow, step) for step in workflow.steps],
        )

    def start(self, name: str, inputs: Mapping[str, Any], principal: str | None) -> WorkflowProgress:
        budget = Budget.for_seconds(CALL_SECONDS)
        workflow = _find(self.catalog(), name)
        values = check_inputs(workflow, inputs)
        now = time.time()
        state = WorkflowState(
            principal=principal,
            definition=workflow.model_dump(mode="json", by_alias=True, exclude_none=True),
            inputs=values,
            saved={},
            step=workflow.steps[0].id,
            created=now,
            updated=now,
            expires=now + self.states.ttl,
        )
        problems = enter_step(state, workflow.steps[0])
        if problems:
            raise InvalidArgument(f"{name} cannot start: " + "; ".join(problems), fix="Check the inputs.")
        state_id = self.states.new_id()
        progress = _shown(workflow, lambda: self._progress(workflow, state_id, state, budget))
        self.states.create(state, state_id)
        return progress

    def state(self, state_id: str, principal: str | None) -> WorkflowProgress:
        state = self.states.load(state_id, principal)
        workflow = _definition(state)
        budget = Budget.for_seconds(CALL_SECONDS)
        return _shown(workflow, lambda: self._progress(workflow, state_id, state, budget))

    def requirement(
        self, state_id: str, answer: Any, step: str | None, principal: str | None
    ) -> dict[str, Any] | None:
        """The operation and arguments whose facts the current step's justification is scoped by.

        The caller (the session's worker) runs that operation's checks to read the facts from the
        data, as it does before every gated call; None when the step justifies nothing or the answer
        does not even name a choice (submit then reports why).
        """
        state = self.states.load(state_id, principal)
        workflow = _definition(state)
        current = current_step(workflow, state, step)
        if current.requires is None:
            return None
        try:
            budget = Budget.for_seconds(CALL_SECONDS)
            args = requirement_args(current, step_values(state, current), answer, budget)
        except TemplateError:
            return None
        return {"operation": current.requires.operation, "args": args}

    def submit(
        self,
        state_id: str,
        answer: Any,
        step: str | None,
        principal: str | None,
        facts: Mapping[str, Any] | None = None,
        check_problem: str | None = None,
        review: dict[str, Any] | None = None,
    ) -> WorkflowProgress:
        """Check ``answer`` for the current step completely; if it passes, keep it and move on.

        A ``requires`` answer below ``min_confidence`` raises :class:`ReviewNeeded` before anything
        is saved, unless ``review`` carries the user's approval (the server asks, then submits again).
        The work is done on the state as read, with no lock held; the save then refuses if another
        call saved the run meanwhile.
        """
        budget = Budget.for_seconds(CALL_SECONDS)
        state = self.states.load(state_id, principal)
        workflow = _definition(state)
        current = current_step(workflow, state, step)
        values = step_values(state, current)
        problems = answer_problems(current.answer_kind, answer)
        if current.answer_kind == "text" and not isinstance(answer, str) and not problems:
            # MCP SDKs parse a JSON-looking string argument before the tool sees it (Claude Desktop
            # sends lists as strings): a text answer that was JSON is kept as the text it was.
            answer = json.dumps(answer, ensure_ascii=False)
        record = None
        if current.requires is not None and not problems:
            record = self._justified(current, values, answer, facts, check_problem, problems, budget)
        if not problems:
            problems += advance(workflow, state, current, answer, budget)
        if not problems:
            try:  # the next instruction must render with what was just saved (a field it reads)
                progress = self._progress(workflow, state_id, state, budget)
            except TemplateError as exc:
                problems.append(f"the next instruction cannot be written with this answer: {exc}")
        if not problems and record is not None and review is None and _below(record, self.min_confidence):
            raise ReviewNeeded(
                f"This step's justification has {record.justification.confidence} confidence, below "
                f"the server's minimum ({self.min_confidence}): the user must approve it.",
                fix="The server asks the user; without elicitation, ask the user yourself and submit "
                "the confidence you honestly hold then.",
                details={
                    "operation": record.operation,
                    "decision": record.prompt_args,
                    "step": current.id,
                },
            )
        if record is not None and review is not None:
            record = record.model_copy(update={"review": review})
        if problems:
            raise AnswerInvalid(
                f"The answer to step {current.id!r} was not accepted: " + "; ".join(problems),
                fix=f"Nothing was saved; the step stands. Correct every listed problem and submit again "
                f"({self._next_action(state_id, current, answer_kind=current.answer_kind)}).",
                details={"errors": problems, "step": current.id},
            )
        state.updated = time.time()
        state.expires = state.updated + self.states.ttl
        self.states.save(state_id, state, principal)
        if record is not None:
            # The same decision justified meanwhile: the later call is a hit either way.
            with contextlib.suppress(RecordExists):
                self.gate.store.put(record)
        return progress

    def _justified(
        self,
        step: Step,
        values: dict[str, Any],
        answer: Any,
        facts: Mapping[str, Any] | None,
        check_problem: str | None,
        problems: list[str],
        budget: Budget,
    ) -> Record | None:
        """The record the gate would store for this answer, or None with ``problems`` filled in."""
        from llmc_mcp.operations.catalog import get_operation

        requirement = step.requires
        assert requirement is not None
        op = get_operation(requirement.operation)
        try:
            raw = requirement_args(step, values, answer, budget)
            args = op.validate(raw)
        except (TemplateError, LlmcError) as exc:
            problems.extend(justification_errors(answer))
            problems.append(f"{requirement.operation} cannot be set up from this answer: {exc}")
            return None
        if check_problem:
            problems.extend(justification_errors(answer))
            problems.append(f"{requirement.operation} refuses these arguments: {check_problem}")
            return None
        decisions = [d for d in op.decisions(args, check_facts(facts)) if d.domain == requirement.domain]
        if not decisions:
            # This choice is not a consequential one for the operation (a lossless compression): the
            # answer is kept as reasoning, but there is no decision to store it for.
            problems.extend(justification_errors(answer))
            return None
        decision = decisions[0]
        template = self.gate.prompts.get(decision.prompt)
        try:
            valid = validate_justification(answer, decision, template.render(decision.args))
        except LlmcError as exc:
            problems.extend(exc.details.get("errors") or [exc.message])
            return None
        return Record(
            key=self.gate.key(decision),
            domain=decision.domain,
            operation=op.qualname,
            prompt=decision.prompt,
            prompt_args=decision.args,
            prompt_hash=template.hash,
            justification=valid,
        )

    def _progress(
        self, workflow: Workflow, state_id: str, state: WorkflowState, budget: Budget
    ) -> WorkflowProgress:
        common = {"workflow": workflow.name, "state_id": state_id, "total_steps": len(workflow.steps)}
        if state.complete or state.step is None:
            return WorkflowProgress(
                **common, complete=True, step=None, step_index=None, item=None, items=None,
                instruction=None, answer=None, next_action=None, results=dict(state.saved),
            )  # fmt: skip
        step = workflow.step(state.step)
        values = step_values(state, step)
        instruction = render(step.instruction, values, budget)
        if step.requires is not None:
            instruction += (
                f"\n\nAnswer with a justification ({step.requires.domain}): {JUSTIFICATION_SHAPE}; "
                "choice.method is the value you choose. Each text field in your own words."
            )
        items = step_items(state, step)
        return WorkflowProgress(
            **common,
            complete=False,
            step=step.id,
            step_index=workflow.index(step.id) + 1,
            item=state.item + 1 if items is not None else None,
            items=len(items) if items is not None else None,
            instruction=instruction,
            answer=step.answer_kind,
            next_action=self._next_action(state_id, step, answer_kind=step.answer_kind),
            results=None,
        )

    def _next_action(self, state_id: str, step: Step, *, answer_kind: str) -> str | ToolCall:
        if self.face == "code":
            call = f"workflows.submit({state_id!r}, answer, step={step.id!r})"
            return f"{call}  # answer: {ANSWER_WORDS[answer_kind]}"
        return ToolCall(
            tool="workflow_submit",
            arguments={"state_id": state_id, "step": step.id, "answer": f"<{ANSWER_WORDS[answer_kind]}>"},
        )


def _shown(workflow: Workflow, progress: Callable[[], WorkflowProgress]) -> WorkflowProgress:
    """``progress()``, a step that cannot be written (it loops over too much) refused with the reason."""
    try:
        return progress()
    except TemplateError as exc:
        raise Refused(
            f"The current step of {workflow.name} cannot be written: {exc}.",
            fix="The workflow's definition is at fault, not your call: tell the user which step it is; "
            "start another workflow meanwhile.",
        ) from None


def _find(catalog: Catalog, name: object) -> Workflow:
    workflow = catalog.workflows.get(str(name))
    if workflow is None:
        raise NotFound(
            f"No workflow named {str(name)[:100]!r}.",
            fix=f"Known: {', '.join(sorted(catalog.workflows))} (workflows.list() describes them).",
        )
    return workflow


def _definition(state: WorkflowState) -> Workflow:
    return Workflow.model_validate(state.definition)


def _inputs(workflow: Workflow) -> list[WorkflowInput]:
    return [WorkflowInput(name=s.name, description=s.description) for s in workflow.inputs]


def _summary(workflow: Workflow, builtin: bool) -> WorkflowSummary:
    return WorkflowSummary(
        name=workflow.name,
        description=workflow.description,
        builtin=builtin,
        inputs=_inputs(workflow),
        steps=len(workflow.steps),
    )


def _step_info(workflow: Workflow, step: Step) -> WorkflowStepInfo:
    requires = step.requires
    return WorkflowStepInfo(
        id=step.id,
        instruction=step.instruction,
        answer=step.answer_kind,
        save=step.save,
        foreach=step.foreach,
        requires=f"{requires.domain} via {requires.operation}" if requires is not None else None,
        next=successors(workflow, step),
        complete=step.complete,
    )


def local_engine(workspace: Workspace, face: Face, ttl_seconds: float = 7 * 24 * 3600.0) -> Engine:
    """An engine with this workspace's own gate (store and prompts), for work done in-process."""
    from llmc_mcp.outputs import OutputLedger
    from llmc_mcp.reflection.prompts import PromptLibrary
    from llmc_mcp.reflection.store import JustificationStore

    store = JustificationStore(workspace.preflight_dir)
    gate = Gate(store, PromptLibrary.default(), next_action="")
    return Engine(
        workspace, gate, face=face, ttl_seconds=ttl_seconds, outputs=OutputLedger(workspace, signer=store)
    )


class ReviewNeeded(LlmcError):
    """A ``requires`` step's justification is below ``--min-confidence``: nothing was saved yet."""

    kind = "review_required"


_RANK = {"low": 0, "medium": 1, "high": 2}


def _below(record: Record, minimum: str) -> bool:
    return _RANK[record.justification.confidence] < _RANK[minimum]
