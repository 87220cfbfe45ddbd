"""What a run has done and what it does next, derived from its nodes. Pure: no I/O.

A run is its ``goal`` node; everything it wrote carries ``payload.run``. Reading
those nodes in sequence order rebuilds the run's *visits* (one execution of one
spec node each):

* an ``inference`` with ``llm = X`` continues the last visit when that visit is
  LLM node X waiting on tool results, otherwise it opens a new visit of X; an
  inference without tool calls completes its visit (output: its ``content``);
* a ``tool_call`` with ``llm`` belongs to the inference it hangs off; one with
  ``node`` (a tool node) opens a visit of that node, completed by its result;
* a ``resource`` keyed ``run:<run>:node:<name>`` is a completed var/var_set visit,
  or, when its payload has ``loop`` (``{"iteration", "done"}``), a loop record:
  iteration ``iteration`` of loop ``name`` starts (its body runs next), or with
  ``done`` the loop is over after ``iteration`` iterations (its edges run next);
* ``answer`` completes the run and ``protocol_error`` fails it.

``next_action`` compares that with the spec, the way seed 000's executor compares
started children with the spec, but from the graph instead of a stored step
index: no bookkeeping can disagree with what actually committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..core.graph import CausalNode
from .results import PendingApproval, RunError

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

STEP_PREFIX: Final = "run:"


def step_key(run: str, node: str) -> str:
    """Resource key of a var/var_set node's record in the thread graph."""
    return f"run:{run}:node:{node}"


def _run_of(node: CausalNode) -> str | None:
    p = node.payload
    return p.get("run") if isinstance(p, dict) and isinstance(p.get("run"), str) else None


@dataclass(kw_only=True)
class Call:
    """One tool call (a child executor in seed 000's terms) and what became of it."""

    node: CausalNode
    verification: CausalNode | None = None
    result: CausalNode | None = None

    @property
    def call_id(self) -> str:
        return str(self.node.payload["call_id"])

    @property
    def name(self) -> str:
        return str(self.node.payload["name"])

    @property
    def arguments(self) -> dict[str, Any]:
        a = self.node.payload.get("arguments")
        return dict(a) if isinstance(a, dict) else {}

    @property
    def needs_approval(self) -> bool:
        return bool(self.node.payload.get("needs_approval"))

    @property
    def decision(self) -> str | None:
        return None if self.verification is None else self.verification.payload.get("decision")

    @property
    def pending(self) -> bool:
        """Waiting for a human decision."""
        return self.result is None and self.needs_approval and self.verification is None

    @property
    def runnable(self) -> bool:
        """May be executed now (re-issued, if a process died while running it)."""
        return self.result is None and not self.pending

    def approval(self) -> PendingApproval:
        return PendingApproval(
            call_id=self.call_id, node_id=self.node.id, name=self.name, arguments=self.arguments
        )


@dataclass(kw_only=True)
class Visit:
    """One execution of one spec node inside a run."""

    node: str
    kind: str  # llm | tool | var | loop
    index: int  # position among the run's visits
    inferences: list[CausalNode] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)  # of the latest inference / the tool node
    complete: bool = False
    output: Any = None
    # A loop record: the iteration that starts (or, when done, how many ran).
    iteration: int | None = None
    done: bool = False


@dataclass(kw_only=True)
class RunView:
    """A run's nodes and what they mean."""

    goal: CausalNode
    nodes: list[CausalNode] = field(default_factory=list)
    visits: list[Visit] = field(default_factory=list)
    calls: dict[str, Call] = field(default_factory=dict)  # tool_call node id -> call
    answer: CausalNode | None = None
    error: CausalNode | None = None
    loops: dict[str, Visit] = field(default_factory=dict)  # loop node -> its latest record
    steps: int = 0  # node executions (loop records are bookkeeping, not counted)

    @property
    def run_id(self) -> str:
        return str(self.goal.payload["run"])

    @property
    def user(self) -> str | None:
        meta = self.goal.payload.get("metadata")
        u = meta.get("user") if isinstance(meta, dict) else None
        return u if isinstance(u, str) else None

    @classmethod
    def derive(cls, goal: CausalNode, nodes: Sequence[CausalNode]) -> RunView:
        """The view of the run ``goal`` starts, from nodes in sequence order (others ignored)."""
        view = cls(goal=goal)
        for n in nodes:
            if n.id != goal.id and n.sequence > goal.sequence:
                view.add(n)
        return view

    def add(self, n: CausalNode) -> None:
        """Fold one more node (in sequence order) into the view."""
        if _run_of(n) != self.run_id or n.kind == "goal":
            return
        self.nodes.append(n)
        p = n.payload
        last = self.visits[-1] if self.visits else None
        if n.kind == "inference":
            cont = (
                last is not None
                and last.kind == "llm"
                and last.node == p.get("llm")
                and not last.complete
                and "input" not in p
            )
            if not cont:
                last = Visit(node=str(p.get("llm")), kind="llm", index=len(self.visits))
                self.visits.append(last)
                self.steps += 1
            assert last is not None
            last.inferences.append(n)
            last.calls = []
            if not p.get("tool_calls"):
                last.complete = True
                last.output = p.get("content")
        elif n.kind == "tool_call":
            call = Call(node=n)
            self.calls[n.id] = call
            if p.get("node") is not None and p.get("llm") is None:
                v = Visit(node=str(p["node"]), kind="tool", index=len(self.visits), calls=[call])
                self.visits.append(v)
                self.steps += 1
            elif last is not None:
                last.calls.append(call)
        elif n.kind == "verification":
            c = self.calls.get(str(p.get("tool_call")))
            if c is not None:
                c.verification = n
        elif n.kind == "tool_result":
            c = next((self.calls[x] for x in n.parents if x in self.calls), None)
            if c is not None and c.result is None:
                c.result = n
                for v in reversed(self.visits):
                    if v.kind == "tool" and c in v.calls:
                        v.complete = True
                        v.output = p.get("content")
                        break
        elif n.kind == "resource" and (n.resource_key or "").startswith(f"run:{self.run_id}:node:"):
            loop = p.get("loop")
            if isinstance(loop, dict):
                v = Visit(
                    node=str(p.get("node")),
                    kind="loop",
                    index=len(self.visits),
                    complete=True,
                    output=p.get("output"),
                    iteration=int(loop.get("iteration") or 0),
                    done=bool(loop.get("done")),
                )
                self.loops[v.node] = v
            else:
                v = Visit(
                    node=str(p.get("node")),
                    kind="var",
                    index=len(self.visits),
                    complete=True,
                    output=p.get("output"),
                )
            self.visits.append(v)
            if v.kind != "loop":
                self.steps += 1
        elif n.kind == "answer" and self.answer is None:
            self.answer = n
        elif n.kind == "protocol_error" and self.error is None:
            self.error = n

    # -- status

    @property
    def finished(self) -> bool:
        return self.answer is not None or self.error is not None

    def pending(self) -> list[Call]:
        last = self.visits[-1] if self.visits else None
        if self.finished or last is None or last.complete:
            return []
        return [c for c in last.calls if c.pending]

    @property
    def status(self) -> str:
        """completed | failed | suspended | running (running also means interrupted)."""
        if self.error is not None:
            return "failed"
        if self.answer is not None:
            return "completed"
        if self.pending() and not any(c.runnable for c in self.visits[-1].calls):
            return "suspended"
        return "running"

    @property
    def run_error(self) -> RunError | None:
        if self.error is None:
            return None
        e = self.error.payload.get("error") or {}
        return RunError(code=str(e.get("code", "tether")), message=str(e.get("message", "")))

    def loop_index(self, loop: str) -> int | None:
        """The iteration loop ``loop`` is in (None when it is not running)."""
        rec = self.loops.get(loop)
        return None if rec is None or rec.done else rec.iteration

    def outputs(self) -> dict[str, dict[str, Any]]:
        """``nodes`` as templates see them: the latest output of each completed spec node."""
        out: dict[str, dict[str, Any]] = {}
        for v in self.visits:
            if v.complete:
                out[v.node] = {"output": v.output}
        return out

    def find_call(self, ref: str) -> Call | None:
        """A call by its tool_call node id or its call id."""
        if ref in self.calls:
            return self.calls[ref]
        return next((c for c in self.calls.values() if c.call_id == ref), None)


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
    runnable = tuple(c for c in last.calls if c.runnable)
    if runnable:
        return RunCalls(calls=runnable)
    pending = tuple(c for c in last.calls if c.pending)
    if pending:
        return Suspend(pending=pending)
    if len(last.inferences) >= max_tool_rounds:
        return Fail(
            code="step_limit",
            message=f"llm node {last.node!r} made {len(last.inferences)} rounds of tool calls "
            "without answering, the limit (max_tool_rounds)",
        )
    return Infer(visit=last)
