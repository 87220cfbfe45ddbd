"""What a run does next, from its view (``tether.projections.runs.RunView``). Pure: no I/O.

The view (visits, calls, status) is derived in the projection layer, the one place
every reader takes it from; ``next_action`` compares it with the spec, the way seed
000's executor compares started children with the spec, but from the graph instead
of a stored step index: no bookkeeping can disagree with what actually committed.
A ``Suspend`` is exactly a ``suspended`` status, a ``Finish`` a ``completed`` or
``failed`` one; every other action belongs to a ``running`` run.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..projections.runs import Call, RunView, Visit, step_key

__all__ = [
    "Action",
    "Call",
    "Fail",
    "Finish",
    "Infer",
    "Route",
    "RunCalls",
    "RunView",
    "Suspend",
    "Visit",
    "next_action",
    "step_key",
]


# -- actions -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Finish:
    """Nothing to do: the run completed or failed."""


@dataclass(frozen=True, kw_only=True)
class Suspend:
    pending: tuple[Call, ...]


@dataclass(frozen=True, kw_only=True)
class RunCalls:
    """Execute (or re-issue) these calls; ``rejected`` ones only get their error result."""

    calls: tuple[Call, ...]


@dataclass(frozen=True, kw_only=True)
class Infer:
    """Ask the model again in the running LLM visit (its tool results are all in)."""

    visit: Visit


@dataclass(frozen=True, kw_only=True)
class Route:
    """Follow the edges out of ``visit`` (None: enter the start node with the goal's input)."""

    visit: Visit | None


@dataclass(frozen=True, kw_only=True)
class Fail:
    code: str
    message: str


Action = Finish | Suspend | RunCalls | Infer | Route | Fail


def next_action(view: RunView, *, max_steps: int, max_tool_rounds: int) -> Action:
    """The one thing to do next for this run."""
    if view.finished:
        return Finish()
    if not view.visits:
        return Route(visit=None)
    last = view.visits[-1]
    if last.complete:
        if last.kind != "loop" and view.steps >= max_steps:
            return Fail(
                code="step_limit",
                message=f"the run executed {view.steps} nodes, the limit (max_steps); "
                "check the spec's edges for a loop or raise max_steps",
            )
        return Route(visit=last)
    runnable = tuple(view.runnable())
    if runnable:
        return RunCalls(calls=runnable)
    pending = tuple(view.pending())
    if pending:
        return Suspend(pending=pending)
    if len(last.inferences) >= max_tool_rounds:
        return Fail(
            code="step_limit",
            message=f"llm node {last.node!r} made {len(last.inferences)} rounds of tool calls "
            "without answering, the limit (max_tool_rounds)",
        )
    return Infer(visit=last)
