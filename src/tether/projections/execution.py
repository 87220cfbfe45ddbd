"""Execution views (SPEC §3, seed 000): NodeActorState and ExecutorState, derived from the graph.

Nothing here is stored: a run is its ``goal`` node, and everything else follows from
the nodes that carry its run id (docs/graph-encoding.md):

* the root executor is the run; its actor is the start LLM node (``goal.llm``);
* its children are the tool calls of that LLM's inferences, the calls of the spec's
  tool nodes (``llm: null``), the step records of its var / var_set nodes
  (``run:<run>:node:<name>`` resources, always completed) and, for every other
  LLM node that ran in the run (a sub-node call), one child executor whose own
  children are that node's tool calls;
* status: the run's is ``RunView.status`` (``tether.projections.runs``, the one rule
  the runtime and the operations use too): ``protocol_error`` -> failed; ``answer``
  -> completed; a current round whose calls without a result all wait for approval
  -> suspended; otherwise running (the view cannot tell a live process from an
  interrupted one: the runtime re-issues such calls on resume). A tool call's is
  ``Call.status``: completed or failed by its result; without one, failed when
  rejected or when its run ended, suspended while it waits for a decision, else
  running. A sub-node executor is failed or completed with its run, else running
  while any of its calls runs, suspended while one waits, then running (its model
  still has to answer) or completed. ``idle`` is reserved for executors the runtime
  has created but that have no node yet; the graph never derives it.

Erased runs (``tether.crypto.erase_user``): outside ``erased_placeholders()`` the
store raises ``KeyErased``; inside, a run whose goal is erased has lost its run id,
so ``list_runs`` leaves it out and ``execution_view`` of a run that is not among
the readable ones, in a thread holding erased goals, raises ``KeyErased``.

Ids are node ids (``cw_...`` strings), not UUIDs as in seed 000: ``execution_id`` is
the goal / inference / tool_call / step record node id; actor ids are ``llm:<name>``,
``tool:<name>`` and ``node:<name>``, stable across runs like seed 000's actors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core import scopes
from ..core.erased import is_erased
from ..core.errors import KeyErased, NotFound
from ..core.graph import CausalNode
from ..store.base import Store
from .projection import flatten, project
from .reads import read_nodes
from .runs import Call, RunView, run_views

__all__ = [
    "ExecutorState",
    "ExecutorStatus",
    "NodeActorState",
    "RunInfo",
    "execution_view",
    "list_runs",
    "run_infos",
]

ExecutorStatus = Literal["idle", "running", "suspended", "completed", "failed"]


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeActorState:
    """Seed 000's actor state. ``node_state``: ``{"messages": [...]}`` for an LLM node
    (the node's whole conversation in the thread through this run, as seed 000's actor
    remembers it across turns; compaction summaries aside), ``{"input", "output",
    "is_error", "call_id"}`` for a tool."""

    actor_id: str
    node_id: str
    node_name: str
    node_type: str  # "LLMNode" | "ToolNode"
    status: ExecutorStatus
    has_error: bool
    node_state: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "actor_id": self.actor_id,
            "node_id": self.node_id,
            "node_name": self.node_name,
            "node_type": self.node_type,
            "status": self.status,
            "has_error": self.has_error,
            "node_state": self.node_state,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutorState:
    """Seed 000's executor state plus the tree itself (``children``) and its actor."""

    execution_id: str
    node_actor_id: str
    status: ExecutorStatus
    child_executor_ids: tuple[str, ...] = ()
    children: tuple[ExecutorState, ...] = ()
    actor: NodeActorState | None = None
    run: str = ""
    kind: Literal["run", "llm", "tool_call", "step"] = "run"
    # The OpenTelemetry trace the run was started in (its goal's ``trace``), if traced.
    trace_id: str | None = None

    def walk(self) -> Iterable[ExecutorState]:
        """This executor and all its descendants, depth first."""
        yield self
        for c in self.children:
            yield from c.walk()

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution_id": self.execution_id,
            "node_actor_id": self.node_actor_id,
            "status": self.status,
            "child_executor_ids": list(self.child_executor_ids),
            "children": [c.to_dict() for c in self.children],
            "actor": self.actor.to_dict() if self.actor else None,
            "run": self.run,
            "kind": self.kind,
            **({"trace_id": self.trace_id} if self.trace_id is not None else {}),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class RunInfo:
    """One run of a thread, as ``list_runs`` reports it."""

    run: str
    status: ExecutorStatus
    goal_id: str
    started_at: str
    ended_at: str | None = None
    llm: str | None = None
    input: Any = None
    error: dict[str, Any] | None = None
    sequence: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "status": self.status,
            "goal_id": self.goal_id,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "llm": self.llm,
            "input": self.input,
            "error": self.error,
            "sequence": self.sequence,
        }


def _llm_of(n: CausalNode) -> str | None:
    p = n.payload
    llm = p.get("llm") if isinstance(p, dict) else None
    return llm if isinstance(llm, str) else None


def _step_executor(n: CausalNode, run: str, name: str) -> ExecutorState:
    """A step record (a spec's var / var_set node ran): a completed child."""
    p = n.payload if isinstance(n.payload, dict) else {}
    raw = p.get("node")
    node = raw if isinstance(raw, str) else name
    loop = p.get("loop")
    actor = NodeActorState(
        actor_id=f"node:{node}",
        node_id=node,
        node_name=node,
        # A loop record (an iteration starts, or the loop ends) or a var/var_set step.
        node_type="LoopNode" if isinstance(loop, dict) else "VarNode",
        status="completed",
        has_error=False,
        node_state={
            "output": p.get("output"),
            **({"loop": loop} if isinstance(loop, dict) else {}),
            # A step on a call-scoped variable: its value was never stored.
            **({"call_scope": True} if p.get("call") is True else {}),
        },
    )
    return ExecutorState(
        execution_id=n.id,
        node_actor_id=actor.actor_id,
        status="completed",
        actor=actor,
        run=run,
        kind="step",
    )


def _tool_executor(call: Call, run_ended: bool, run: str) -> ExecutorState:
    p = call.node.payload
    result = call.result
    cid = p.get("call_id")
    status: ExecutorStatus = call.status(run_finished=run_ended)
    name = str(p.get("name"))
    spec_node = p.get("node") if isinstance(p.get("node"), str) else name  # a tool node's name
    actor = NodeActorState(
        actor_id=f"tool:{name}",
        node_id=spec_node,
        node_name=spec_node,
        node_type="ToolNode",
        status=status,
        has_error=status == "failed",
        node_state={
            "call_id": cid,
            "input": p.get("arguments"),
            "output": result.payload.get("content") if result is not None else None,
            "is_error": bool(result.payload.get("is_error")) if result is not None else False,
        },
    )
    return ExecutorState(
        execution_id=call.node.id,
        node_actor_id=actor.actor_id,
        status=status,
        actor=actor,
        run=run,
        kind="tool_call",
    )


def _fold(children: list[ExecutorState], fallback: ExecutorStatus) -> ExecutorStatus:
    """An unfinished executor's status from its children's: running while one of them
    runs (a crash window with a call waiting beside it is running, as for the run)."""
    if any(c.status == "running" for c in children):
        return "running"
    if any(c.status == "suspended" for c in children):
        return "suspended"
    return fallback


def build_execution(nodes: list[CausalNode], run: str) -> ExecutorState:
    """The executor tree of ``run`` from its nodes (pure; ``nodes`` in sequence order).

    An LLM actor's messages are its conversation over ``nodes`` up to the run's last
    node: give the thread from its start for the node's whole history.
    """
    view = run_views(nodes).get(run)
    if view is None:
        erased = sum(1 for n in nodes if n.kind == "goal" and is_erased(n.payload))
        if erased:
            raise KeyErased(
                f"run {run!r} is not among the readable runs of this thread, and {erased} "
                "runs of it were erased (their run ids with them): it may be one of those",
                run=run,
                erased_runs=erased,
            )
        raise NotFound(f"run {run!r} has no goal node in this thread", run=run)
    goal = view.goal
    mine = [goal, *view.nodes]
    ended = view.finished
    start_llm = goal.payload.get("llm") if isinstance(goal.payload.get("llm"), str) else None
    # The run's own children: the start LLM's tool calls, tool nodes' calls (llm null)
    # and step records; every other LLM node is a sub-executor holding its calls.
    children: list[ExecutorState] = []
    by_llm: dict[str, list[ExecutorState]] = {}
    first_inference: dict[str, CausalNode] = {}
    last_inference: dict[str, CausalNode] = {}
    steps = f"run:{run}:node:"
    for n in view.nodes:
        llm = _llm_of(n)
        if n.kind == "inference" and llm is not None:
            first_inference.setdefault(llm, n)
            last_inference[llm] = n
            if llm != start_llm:
                by_llm.setdefault(llm, [])
        elif n.kind == "tool_call" and n.id in view.calls:
            ex = _tool_executor(view.calls[n.id], ended, run)
            if llm is None or llm == start_llm:
                children.append(ex)
            else:
                by_llm.setdefault(llm, []).append(ex)
        elif n.kind == "resource" and (n.resource_key or "").startswith(steps):
            children.append(_step_executor(n, run, str(n.resource_key)[len(steps) :]))

    # What the node remembers at the end of this run (seed 000: an LLM actor keeps the
    # whole history across turns): every earlier run's messages and this run's.
    through = max(n.sequence for n in mine)
    history = [n for n in nodes if n.sequence <= through]

    def llm_actor(llm: str, status: ExecutorStatus) -> NodeActorState:
        return NodeActorState(
            actor_id=f"llm:{llm}",
            node_id=llm,
            node_name=llm,
            node_type="LLMNode",
            status=status,
            has_error=status == "failed",
            node_state={"messages": flatten(project(history, llm=llm, run=run))},
        )

    for llm, calls in by_llm.items():
        last = last_inference.get(llm)
        waiting = last is not None and bool(last.payload.get("tool_calls"))
        sub: ExecutorStatus = (
            view.status if ended else _fold(calls, "running" if waiting else "completed")
        )
        children.append(
            ExecutorState(
                execution_id=first_inference[llm].id
                if llm in first_inference
                else calls[0].execution_id,
                node_actor_id=f"llm:{llm}",
                status=sub,
                child_executor_ids=tuple(c.execution_id for c in calls),
                children=tuple(calls),
                actor=llm_actor(llm, sub),
                run=run,
                kind="llm",
            )
        )
    status = view.status
    actor_name = start_llm or "start"
    return ExecutorState(
        execution_id=goal.id,
        node_actor_id=f"llm:{actor_name}",
        status=status,
        child_executor_ids=tuple(c.execution_id for c in children),
        children=tuple(children),
        actor=llm_actor(actor_name, status),
        run=run,
        kind="run",
        trace_id=trace if isinstance(trace := goal.payload.get("trace"), str) else None,
    )


async def execution_view(
    store: Store, namespace: str, thread_id: str, run_id: str
) -> ExecutorState:
    """The executor tree of one run. Reads the thread from its start: an LLM actor's
    state is the node's whole conversation through the run."""
    scope = scopes.thread(thread_id)
    head = await store.head(namespace, scope)
    nodes = await read_nodes(store, namespace, scope, after=0, before=head.sequence + 1)
    return build_execution(nodes, run_id)


async def list_runs(store: Store, namespace: str, thread_id: str) -> list[RunInfo]:
    """Every run of a thread, oldest first, with its derived status."""
    scope = scopes.thread(thread_id)
    head = await store.head(namespace, scope)
    nodes = await read_nodes(store, namespace, scope, after=0, before=head.sequence + 1)
    return run_infos(nodes)


def run_infos(nodes: Iterable[CausalNode]) -> list[RunInfo]:
    """Every run among a thread's ``nodes`` (in sequence order), oldest first. Pure."""
    return [_info(v) for v in run_views(nodes).values()]


def _info(view: RunView) -> RunInfo:
    g, e = view.goal, view.ended
    err = view.error.payload.get("error") if view.error is not None else None
    return RunInfo(
        run=view.run_id,
        status=view.status,
        goal_id=g.id,
        started_at=g.created_at,
        ended_at=e.created_at if e is not None else None,
        llm=g.payload.get("llm") if isinstance(g.payload.get("llm"), str) else None,
        input=g.payload.get("input"),
        error=err if isinstance(err, dict) else None,
        sequence=g.sequence,
    )
