"""A run, read from its nodes: the one derivation of its visits, calls and status. Pure.

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

Status (SPEC §3, "Execution state"), the one rule every reader uses: the runtime's
planner (``tether.runtime.plan``), the operations (``tether.control`` task and flow
state, the run index) and the views (``execution_view``, ``list_runs``):

* ``failed``: the run has a ``protocol_error`` (even after an answer);
* ``completed``: it has an ``answer``;
* ``suspended``: its current visit waits for a human decision and has nothing else
  it could run: every call without a result needs approval and has none;
* ``running`` otherwise, which includes *interrupted*: a tool call without a result
  that may run is running or was cut short by a crash, and the runtime re-issues it
  on resume. So a round with one call waiting for approval and one runnable call
  not yet run (a crash window) is ``running``: resuming it runs the runnable call
  without anyone's decision, and only then suspends.

``StepResult``, ``PendingApproval`` and ``RunError`` are what a turn returns (over
HTTP too, so ``tether.client`` rebuilds them without the runtime).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..core.graph import CausalNode

__all__ = [
    "CALL_SCOPED",
    "STATUSES",
    "Call",
    "CallStatus",
    "PendingApproval",
    "RunError",
    "RunState",
    "RunStatus",
    "RunView",
    "StepResult",
    "Visit",
    "is_run_goal",
    "run_of",
    "run_views",
    "step_key",
]

STEP_PREFIX: Final = "run:"

# What the graph says of a run (``RunStatus`` is what a finished turn reports).
RunState = Literal["running", "suspended", "completed", "failed"]
# What the graph says of one tool call.
CallStatus = Literal["running", "suspended", "completed", "failed"]


def step_key(run: str, node: str) -> str:
    """Resource key of a var/var_set node's record in the thread graph."""
    return f"run:{run}:node:{node}"


RunStatus = Literal["completed", "suspended", "failed"]
STATUSES: tuple[RunStatus, ...] = ("completed", "suspended", "failed")


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingApproval:
    """A tool call waiting for a human: approve or reject it by ``call_id`` or ``node_id``."""

    call_id: str
    node_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "node_id": self.node_id,
            "name": self.name,
            "arguments": self.arguments,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingApproval:
        return cls(
            call_id=str(data["call_id"]),
            node_id=str(data["node_id"]),
            name=str(data["name"]),
            arguments=dict(data.get("arguments") or {}),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunError:
    """Why a run failed: the ``code`` and ``message`` of its ``protocol_error`` node."""

    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunError:
        return cls(code=str(data["code"]), message=str(data["message"]))


@dataclass(frozen=True, kw_only=True, slots=True)
class StepResult:
    """The outcome of a turn, as the graph records it.

    ``status``: ``completed`` (``answer`` holds the output), ``suspended``
    (``pending_approvals`` lists the tool calls to approve or reject) or ``failed``
    (``error`` says why).
    """

    run_id: str
    thread: str
    status: RunStatus
    answer: Any = None
    pending_approvals: tuple[PendingApproval, ...] = ()
    error: RunError | None = None

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def suspended(self) -> bool:
        return self.status == "suspended"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread": self.thread,
            "status": self.status,
            "answer": self.answer,
            "pending_approvals": [p.to_dict() for p in self.pending_approvals],
            "error": None if self.error is None else self.error.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepResult:
        status = data["status"]
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        err = data.get("error")
        return cls(
            run_id=str(data["run_id"]),
            thread=str(data["thread"]),
            status=status,
            answer=data.get("answer"),
            pending_approvals=tuple(
                PendingApproval.from_dict(p) for p in data.get("pending_approvals") or ()
            ),
            error=None if err is None else RunError.from_dict(err),
        )


def run_of(node: CausalNode) -> str | None:
    """The run a node belongs to (its ``payload.run``), or None."""
    p = node.payload
    r = p.get("run") if isinstance(p, dict) else None
    return r if isinstance(r, str) else None


def is_run_goal(node: CausalNode) -> bool:
    """Whether ``node`` starts a run: a goal whose payload names its run. A goal without
    one (a StateWeave snapshot's, any imported graph's) is a message of the conversation,
    not a run: nothing runs, waits or resumes from it."""
    return node.kind == "goal" and run_of(node) is not None


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

    def status(self, *, run_finished: bool) -> CallStatus:
        """The call's own status: ``completed``/``failed`` by its result; without one,
        ``failed`` when rejected or when its run ended, ``suspended`` while it waits for
        a decision, else ``running`` (or interrupted: the runtime re-issues it)."""
        if self.result is not None:
            return "failed" if self.result.payload.get("is_error") else "completed"
        if run_finished or self.decision == "rejected":
            return "failed"
        return "suspended" if self.pending else "running"

    def approval(self) -> PendingApproval:
        return PendingApproval(
            call_id=self.call_id, node_id=self.node.id, name=self.name, arguments=self.arguments
        )


class _CallScoped:
    """The output of a step on a call-scoped variable, as the graph has it: not there."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CALL_SCOPED"


CALL_SCOPED: Final = _CallScoped()


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
    record: str | None = None  # a var step: the id of its step record


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
        # A view is only ever made of a run's goal (``is_run_goal``).
        return run_of(self.goal) or ""

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
        if run_of(n) != self.run_id or n.kind == "goal":
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
                    # A call-scoped variable's value is never stored: only the call
                    # that wrote the record holds it (the executor's RunContext.held).
                    output=CALL_SCOPED if p.get("call") is True else p.get("output"),
                    record=n.id,
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

    def current(self) -> Visit | None:
        """The visit an unfinished run stands at, while it is not complete (else None)."""
        last = self.visits[-1] if self.visits else None
        if self.finished or last is None or last.complete:
            return None
        return last

    def pending(self) -> list[Call]:
        """The current visit's calls that wait for a human decision (approve or reject)."""
        cur = self.current()
        return [] if cur is None else [c for c in cur.calls if c.pending]

    def runnable(self) -> list[Call]:
        """The current visit's calls that may run now (or be re-issued after a crash)."""
        cur = self.current()
        return [] if cur is None else [c for c in cur.calls if c.runnable]

    @property
    def status(self) -> RunState:
        """The run's status (the module docstring has the rule)."""
        if self.error is not None:
            return "failed"
        if self.answer is not None:
            return "completed"
        if self.pending() and not self.runnable():
            return "suspended"
        return "running"

    @property
    def ended(self) -> CausalNode | None:
        """The node that finished the run (its ``protocol_error``, else its ``answer``)."""
        return self.error if self.error is not None else self.answer

    def result(self, thread: str) -> StepResult:
        """What a turn that stopped here returns (a running run reports ``suspended`` with
        what waits, as a turn only stops when nothing else can run)."""
        if self.error is not None:
            return StepResult(
                run_id=self.run_id, thread=thread, status="failed", error=self.run_error
            )
        if self.answer is not None:
            return StepResult(
                run_id=self.run_id,
                thread=thread,
                status="completed",
                answer=self.answer.payload.get("output"),
            )
        return StepResult(
            run_id=self.run_id,
            thread=thread,
            status="suspended",
            pending_approvals=tuple(c.approval() for c in self.pending()),
        )

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

    def outputs(self, held: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """``nodes`` as templates see them: the latest output of each completed spec node.

        A step on a call-scoped variable stored no output: ``held`` (step record id ->
        value) has it in the call that ran the step; in any other the node is left out,
        so a template naming its output fails like an unknown name.
        """
        out: dict[str, dict[str, Any]] = {}
        for v in self.visits:
            if not v.complete:
                continue
            if v.output is CALL_SCOPED:
                if held is None or v.record is None or v.record not in held:
                    out.pop(v.node, None)
                    continue
                out[v.node] = {"output": held[v.record]}
            else:
                out[v.node] = {"output": v.output}
        return out

    def find_call(self, ref: str) -> Call | None:
        """A call by its tool_call node id or its call id."""
        if ref in self.calls:
            return self.calls[ref]
        return next((c for c in self.calls.values() if c.call_id == ref), None)


def run_views(nodes: Iterable[CausalNode]) -> dict[str, RunView]:
    """Every run among ``nodes`` (a thread's, in sequence order): run id -> its view,
    oldest run first. Runs whose goal is not among ``nodes`` are left out."""
    views: dict[str, RunView] = {}
    for n in nodes:
        r = run_of(n)
        if r is None:
            continue
        if n.kind == "goal":
            views.setdefault(r, RunView(goal=n))
        elif r in views:
            views[r].add(n)
    return views
