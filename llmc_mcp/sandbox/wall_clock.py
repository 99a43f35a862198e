"""The wall clock of a call in a worker (``--exec-timeout``), which the server owns: on expiry the
worker is killed. Time the worker spends waiting on something outside the agent's control (the
host's model, a person answering a form) is not counted against it."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import anyio

_running: ContextVar[anyio.CancelScope | None] = ContextVar("llmc_wall_clock", default=None)
"""The wall clock of the call this task is running in a worker."""


@contextmanager
def wall_clock(seconds: float) -> Iterator[None]:
    """Run the block under a call's wall clock: :class:`TimeoutError` once ``seconds`` have passed,
    not counting the time spent in :func:`paused_wall_clock` blocks inside it."""
    with anyio.fail_after(seconds) as clock:
        token = _running.set(clock)
        try:
            yield
        finally:
            _running.reset(token)


@contextmanager
def paused_wall_clock() -> Iterator[None]:
    """Stop the running call's wall clock inside this block: its deadline moves by the time spent.

    For time the worker waits on the server for something outside the agent's control (the host's
    model answering a sampling request, a person answering a form), which has its own timeout.
    """
    clock = _running.get()
    if clock is None:
        yield
        return
    deadline, start = clock.deadline, anyio.current_time()
    clock.deadline = math.inf
    try:
        yield
    finally:
        clock.deadline = deadline + (anyio.current_time() - start)
