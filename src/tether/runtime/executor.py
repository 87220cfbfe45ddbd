"""The executor: runs an agent spec over a thread's causal graph, one commit per step.

Every iteration reads the run from the graph (``plan.RunView``), asks
``plan.next_action`` what to do, does it, and commits what it produced in one
transaction computed against the head it read:

    goal                       the user's input; the run starts (its own commit)
    inference + tool_calls     one model response, with the memories it wrote
                               (user scope when there is a user) in the same commit
    tool_result                one per call, committed as each call completes, so
                               parallel calls that finish survive a crash of the others
    verification (+ result)    an approval decision
    resource (step record)     a var / var_set node ran (with the variable it wrote)
    answer | protocol_error    the run completed or failed

A tool call node is committed before the tool runs; its id is the idempotency key
the tool receives, so a call that was running when the process died is re-issued
with the same key by whichever process resumes the run. If another writer moved
the thread meanwhile, the commit raises ``Conflict``, nothing is written, and the
executor re-derives from the new graph (a stale model response is dropped; a tool
result is dropped if the call already has one).

Unlike seed 000's executor, nothing here stores executor state or a step index:
status and the next step are always derived, and each step writes only its new
nodes (not four whole state blobs).
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .. import scopes
from .._errors import Conflict, InvalidNode, NotFound, TetherError
from .._graph import CausalNode
from .._txn import Transaction
from .._vocab import Vocabulary
from ..memory import Variables, load_conversation
from ..models._errors import ModelError
from ..models._types import Model, ModelRequest, ModelResponse
from ..store._base import Head, Store
from . import _memory_api
from ._errors import AgentError, ApprovalError, RunSuspendedError, SpecError
from .memory_tools import MemoryTools
from .plan import (
    Call,
    Fail,
    Finish,
    Infer,
    Route,
    RunCalls,
    RunView,
    Suspend,
    Visit,
    next_action,
    step_key,
)
from .results import StepResult
from .spec import LLMNode, Spec, ToolNode, VarNode, VarSetNode
from .templates import Template
from .tools import Tool, ToolArgumentsError, jsonable

log = logging.getLogger("tether.runtime")

_PAGE: Final = 500
_ATTEMPTS: Final = 50


@dataclass(kw_only=True)
class _Run:
    """One run being driven by this process: its view of the graph and the call's context."""

    thread: str
    scope: str
    context: dict[str, Any]
    view: RunView
    generation: int
    seq: int  # the thread head sequence the view reflects
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    variables: Variables | None = None  # one per call: call-scope variables live here

    @property
    def run_id(self) -> str:
        return self.view.run_id

    @property
    def user(self) -> str | None:
        return self.view.user


class Executor:
    """Drives runs of one spec against one store namespace. Stateless between calls."""

    def __init__(
        self,
        *,
        spec: Spec,
        store: Store,
        namespace: str,
        model: Model,
        models: Mapping[str, Model],
        tools: Mapping[str, Tool],
        memory_tools: Mapping[str, MemoryTools],
        vocabulary: Vocabulary,
        max_steps: int,
        max_tool_rounds: int,
    ) -> None:
        self.spec = spec
        self.store = store
        self.namespace = namespace
        self.model = model
        self.models = dict(models)
        self.tools = dict(tools)
        self.memory_tools = dict(memory_tools)
        self.vocabulary = vocabulary
        self.max_steps = max_steps
        self.max_tool_rounds = max_tool_rounds

    # -- entry points ----------------------------------------------------------------

    async def step(
        self,
        input: Any,
        *,
        thread: str,
        user: str | None,
        context: dict[str, Any],
        metadata: Mapping[str, Any] | None,
    ) -> StepResult:
        scope = scopes.thread(thread)
        if user is not None:
            scopes.user(user)
        payload_input = jsonable(input)
        meta = {**jsonable(dict(metadata or {})), "user": user}
        for _ in range(_ATTEMPTS):
            head = await self.store.head(self.namespace, scope)
            view = await self._latest(scope, head)
            if view is not None and not view.finished:
                if view.status == "suspended":
                    pending = [c.approval().to_dict() for c in view.pending()]
                    raise RunSuspendedError(
                        f"thread {thread!r} has run {view.run_id} waiting for approval of "
                        f"{', '.join(p['name'] + ' (' + p['call_id'] + ')' for p in pending)}; "
                        "approve or reject it before the next step",
                        thread=thread,
                        run=view.run_id,
                        pending=pending,
                    )
                # An interrupted run (a crash, a shutdown): finish it first, so turns stay
                # in order and no tool call is left without its result.
                log.info("finishing interrupted run %s on %s", view.run_id, scope)
                await self._drive(self._ctx(thread, scope, head, view, context))
                continue
            run_id = "run_" + secrets.token_hex(12)
            goal_llm = (
                self.spec.start if isinstance(self.spec.node(self.spec.start), LLMNode) else None
            )
            txn = Transaction(self.store, self.namespace, vocabulary=self.vocabulary)
            if _moved(await txn.head(scope), head):
                continue
            goal = await txn.append(
                scope,
                "goal",
                {"run": run_id, "input": payload_input, "llm": goal_llm, "metadata": meta},
            )
            try:
                await txn.commit()
            except Conflict:
                continue
            after = Head(generation=head.generation, sequence=goal.sequence, frontier=(goal.id,))
            return await self._drive(self._ctx(thread, scope, after, RunView(goal=goal), context))
        raise Conflict(f"could not start a run on thread {thread!r}: it kept moving; retry")

    async def resume(self, *, thread: str, context: dict[str, Any]) -> StepResult:
        scope = scopes.thread(thread)
        head = await self.store.head(self.namespace, scope)
        view = await self._latest(scope, head)
        if view is None:
            raise NotFound(f"thread {thread!r} has no run to resume", thread=thread)
        rc = self._ctx(thread, scope, head, view, context)
        if view.finished or view.status == "suspended":
            return self._result(rc)
        return await self._drive(rc)

    async def status(self, *, thread: str) -> RunView | None:
        scope = scopes.thread(thread)
        return await self._latest(scope, await self.store.head(self.namespace, scope))

    async def decide(
        self,
        *,
        thread: str,
        ref: str,
        approve: bool,
        reason: str | None,
        context: dict[str, Any],
        resume: bool,
    ) -> StepResult | None:
        scope = scopes.thread(thread)
        head = await self.store.head(self.namespace, scope)
        view = await self._latest(scope, head)
        if view is None:
            raise ApprovalError(f"thread {thread!r} has no run", thread=thread)
        rc = self._ctx(thread, scope, head, view, context)
        decision = "approved" if approve else "rejected"
        problem: list[str] = []

        async def build(txn: Transaction) -> bool:
            call = rc.view.find_call(ref)
            if call is None or not call.pending:
                waiting = ", ".join(f"{c.name} ({c.call_id})" for c in rc.view.pending())
                state = (
                    "is not a tool call of the thread's latest run"
                    if call is None
                    else "does not need approval"
                    if not call.needs_approval
                    else f"was already {call.decision or 'executed'}"
                )
                problem.append(f"{ref!r} {state}; waiting: {waiting or 'nothing'}")
                return False
            ver = await txn.append(
                scope,
                "verification",
                {
                    "run": rc.run_id,
                    "call_id": call.call_id,
                    "tool_call": call.node.id,
                    "decision": decision,
                    "reason": reason,
                },
                parents=[call.node.id],
            )
            if not approve:
                why = f": {reason}" if reason else ""
                await txn.append(
                    scope,
                    "tool_result",
                    _result_payload(call, f"A human rejected this call{why}.", is_error=True),
                    parents=[call.node.id, ver.id],
                )
            return True

        if not await self._commit(rc, build, expect=None):
            raise ApprovalError(
                problem[-1] if problem else f"could not record the decision on {ref!r}"
            )
        if not resume:
            return None
        return await self._drive(rc)

    # -- reading the graph ---------------------------------------------------------

    def _ctx(
        self, thread: str, scope: str, head: Head, view: RunView, context: dict[str, Any]
    ) -> _Run:
        return _Run(
            thread=thread,
            scope=scope,
            context=context,
            view=view,
            generation=head.generation,
            seq=head.sequence,
        )

    async def _scan(
        self, scope: str, head: Head, run_id: str | None = None
    ) -> tuple[CausalNode | None, list[CausalNode]]:
        """The latest goal (or the goal of ``run_id``) and every node after it, up to ``head``.

        Reads backwards page by page: the cost is the run's size, not the thread's.
        """
        collected: list[CausalNode] = []
        before = head.sequence + 1
        limit = 16  # a run is usually a handful of nodes: start small, then double
        while before > 1:
            page = await self.store.nodes(
                self.namespace, scope, before=before, limit=limit, descending=True
            )
            limit = min(limit * 2, _PAGE)
            if not page:
                break
            for n in page:
                collected.append(n)
                if n.kind == "goal" and (run_id is None or n.payload.get("run") == run_id):
                    collected.reverse()
                    return n, collected
            before = page[-1].sequence
        return None, []

    async def _latest(self, scope: str, head: Head) -> RunView | None:
        goal, nodes = await self._scan(scope, head)
        return None if goal is None else RunView.derive(goal, nodes)

    async def _sync(self, rc: _Run, head: Head) -> None:
        """Bring ``rc.view`` up to ``head`` (reading only the new nodes)."""
        if head.generation != rc.generation or head.sequence < rc.seq:
            goal, nodes = await self._scan(rc.scope, head, rc.run_id)
            if goal is None:
                raise NotFound(
                    f"run {rc.run_id} is no longer in thread {rc.thread!r}: the thread was reset",
                    thread=rc.thread,
                    run=rc.run_id,
                )
            rc.view = RunView.derive(goal, nodes)
            rc.generation, rc.seq = head.generation, head.sequence
            return
        after = rc.seq
        while after < head.sequence:
            page = await self.store.nodes(
                self.namespace, rc.scope, after=after, before=head.sequence + 1, limit=_PAGE
            )
            if not page:
                break
            for n in page:
                rc.view.add(n)
            after = page[-1].sequence
        rc.seq = after

    # -- writing -------------------------------------------------------------------

    async def _commit(
        self,
        rc: _Run,
        build: Callable[[Transaction], Awaitable[bool]],
        *,
        expect: int | None,
    ) -> bool:
        """One step: ``build`` appends to a transaction computed against a fresh head.

        With ``expect`` (the number of the run's nodes the decision was derived from),
        the step only applies while the run holds exactly those nodes; otherwise False
        and the caller re-derives. Other writes to the thread (a summary, a variable)
        do not invalidate it. ``build`` returns False to decline (no longer needed).
        """
        async with rc.lock:
            for attempt in range(_ATTEMPTS):
                txn = Transaction(self.store, self.namespace, vocabulary=self.vocabulary)
                head = await txn.head(rc.scope)
                await self._sync(rc, head)
                if expect is not None and len(rc.view.nodes) != expect:
                    return False
                if not await build(txn):
                    return False
                try:
                    written = await txn.commit()
                except Conflict:
                    await asyncio.sleep(random.uniform(0, 0.001 * 2 ** min(attempt, 7)))
                    continue
                mine = written.get(rc.scope, [])
                for n in mine:
                    rc.view.add(n)
                rc.seq = head.sequence + len(mine)
                return True
        raise Conflict(f"thread {rc.thread!r} kept moving; the step was not written, retry")

    # -- driving -------------------------------------------------------------------

    async def _drive(self, rc: _Run) -> StepResult:
        """Run until the run completes, fails or waits for an approval."""
        while True:
            await self._sync(rc, await self.store.head(self.namespace, rc.scope))
            basis = len(rc.view.nodes)
            action = next_action(
                rc.view, max_steps=self.max_steps, max_tool_rounds=self.max_tool_rounds
            )
            if isinstance(action, Finish | Suspend):
                return self._result(rc)
            try:
                if isinstance(action, Fail):
                    await self._fail(rc, action.code, action.message, basis)
                elif isinstance(action, RunCalls):
                    await self._run_calls(rc, action.calls)
                elif isinstance(action, Infer):
                    node = self._llm_node(action.visit.node)
                    await self._infer(rc, node, None, _visit_input(rc.view, action.visit), basis)
                elif isinstance(action, Route):
                    await self._route(rc, action.visit, basis)
            except (AgentError, ModelError) as e:
                await self._fail(rc, e.code, e.message, basis)
            except TetherError as e:
                if isinstance(e, Conflict | NotFound) or e.code == "store":
                    raise
                await self._fail(rc, e.code, e.message, basis)

    def _result(self, rc: _Run) -> StepResult:
        v = rc.view
        if v.error is not None:
            return StepResult(run_id=v.run_id, thread=rc.thread, status="failed", error=v.run_error)
        if v.answer is not None:
            return StepResult(
                run_id=v.run_id,
                thread=rc.thread,
                status="completed",
                answer=v.answer.payload.get("output"),
            )
        return StepResult(
            run_id=v.run_id,
            thread=rc.thread,
            status="suspended",
            pending_approvals=tuple(c.approval() for c in v.pending()),
        )

    async def _fail(self, rc: _Run, code: str, message: str, expect: int) -> None:
        log.info("run %s failed: [%s] %s", rc.run_id, code, message)

        async def build(txn: Transaction) -> bool:
            await txn.append(
                rc.scope,
                "protocol_error",
                {"run": rc.run_id, "error": {"code": code, "message": message}},
            )
            return True

        await self._commit(rc, build, expect=expect)

    def _llm_node(self, name: str) -> LLMNode:
        node = self.spec.node(name) if name in self.spec else None
        if not isinstance(node, LLMNode):
            raise SpecError(
                f"the run was started by a spec with llm node {name!r}, which this spec lacks; "
                "resume it with the spec that started it"
            )
        return node

    async def _template_scope(
        self, rc: _Run, *, input: Any = None, output: Any = None
    ) -> dict[str, Any]:
        variables: dict[str, Any] = {}
        if self.spec.var_decls:
            v = self._variables(rc)
            if rc.user is not None or all(d.scope != "user" for d in self.spec.var_decls):
                variables = await v.all()
            else:
                # No user: user-scoped variables stay undefined (a template naming one
                # fails with its name) instead of failing every template.
                for d in self.spec.var_decls:
                    if d.scope != "user":
                        variables[d.name] = await v.get(d.name)
        return {
            "input": input,
            "output": output,
            "variables": variables,
            "nodes": rc.view.outputs(),
            "context": rc.context,
            "run": rc.run_id,
            "thread": rc.thread,
        }

    def _variables(self, rc: _Run) -> Variables:
        if rc.variables is None:
            rc.variables = Variables(
                self.store,
                self.namespace,
                self.spec.var_decls,
                thread=rc.thread,
                user=rc.user,
                run=rc.run_id,
            )
        return rc.variables

    # -- routing between spec nodes -------------------------------------------------

    async def _route(self, rc: _Run, visit: Visit | None, basis: int) -> None:
        if visit is None:
            await self._enter(rc, self.spec.start, rc.view.goal.payload.get("input"), basis, True)
            return
        if visit.node not in self.spec:
            raise SpecError(
                f"the run executed node {visit.node!r}, which this spec lacks; "
                "resume it with the spec that started it"
            )
        edges = self.spec.outgoing(visit.node)
        target = None
        if edges:
            scope = await self._template_scope(rc, input=_fed(rc.view, visit), output=visit.output)
            for edge, cond in edges:
                if cond is None or cond.test(scope):
                    target = edge.dst
                    break
        if target is None:
            output = jsonable(visit.output)

            async def build(txn: Transaction) -> bool:
                await txn.append(rc.scope, "answer", {"run": rc.run_id, "output": output})
                return True

            await self._commit(rc, build, expect=basis)
            return
        await self._enter(rc, target, visit.output, basis, False)

    async def _enter(self, rc: _Run, name: str, feed: Any, basis: int, first: bool) -> None:
        node = self.spec.node(name)
        visits = len(rc.view.visits)
        if isinstance(node, LLMNode):
            text: str | None = None
            if not first:
                tmpl = self.spec.template(name, "input")
                if tmpl is not None:
                    text = tmpl.render(await self._template_scope(rc, input=feed))
                else:
                    text = _text(feed)
            await self._infer(rc, node, text, feed if text is None else text, basis)
            return
        if isinstance(node, ToolNode):
            tool = self.tools[node.tool_name]
            tree = self.spec.template(name, "arguments")
            if tree is not None:
                args = _render_tree(tree, await self._template_scope(rc, input=feed))
            else:
                args = feed
            if not isinstance(args, Mapping):
                raise AgentError(
                    f"tool node {name!r} needs a mapping of arguments but its input is {args!r}; "
                    "give the node arguments: {{...}} templates",
                    code="tool_arguments",
                )
            payload = {
                "run": rc.run_id,
                "llm": None,
                "node": name,
                "call_id": f"{name}-{visits}",
                "name": tool.name,
                "arguments": jsonable(dict(args)),
                "needs_approval": bool(
                    tool.needs_approval if node.needs_approval is None else node.needs_approval
                ),
            }

            async def build_call(txn: Transaction) -> bool:
                await txn.append(rc.scope, "tool_call", payload)
                return True

            await self._commit(rc, build_call, expect=basis)
            return
        if isinstance(node, VarNode):
            value = jsonable(await self._variables(rc).get(node.var_name))

            async def build_read(txn: Transaction) -> bool:
                await _record(txn, rc, name, value)
                return True

            await self._commit(rc, build_read, expect=basis)
            return
        assert isinstance(node, VarSetNode)
        tmpl = self.spec.template(name, "value")
        assert isinstance(tmpl, Template)
        value = jsonable(tmpl.value(await self._template_scope(rc, input=feed)))
        variables = self._variables(rc)

        async def build_set(txn: Transaction) -> bool:
            written = await variables.set(node.var, value, txn=txn)
            await _record(txn, rc, name, jsonable(written.value))
            return True

        await self._commit(rc, build_set, expect=basis)

    # -- the model ----------------------------------------------------------------

    async def _infer(
        self, rc: _Run, node: LLMNode, input_text: str | None, visit_input: Any, basis: int
    ) -> None:
        model = self.models.get(node.model, self.model) if node.model else self.model
        scope = await self._template_scope(rc, input=visit_input)
        messages: list[dict[str, Any]] = []
        tmpl = self.spec.template(node.name, "system")
        if tmpl is not None:
            # Rendered per call and never stored: a system prompt may quote the context.
            messages.append({"role": "system", "content": tmpl.render(scope)})
        messages += await load_conversation(
            self.store,
            self.namespace,
            rc.thread,
            llm=node.name,
            policy=self.spec.policy(node.name),
            run=rc.run_id,
            model=model,
        )
        # A summary policy may have committed a summary node: that moves the thread,
        # not the run. Anything new in the run means the plan is stale.
        await self._sync(rc, await self.store.head(self.namespace, rc.scope))
        if len(rc.view.nodes) != basis:
            return
        if input_text is not None:
            messages.append({"role": "user", "content": input_text})
        names = [*self.tools, *self.memory_tools] if node.tools is None else list(node.tools)
        specs = {s.name: s for m in self.memory_tools.values() for s in m.specs}
        mem_scopes = ["app", *([scopes.user(rc.user)] if rc.user else []), rc.scope]
        request = ModelRequest(
            messages=messages,
            tools=[self.tools[n].spec if n in self.tools else specs[n] for n in names],
            memory=await _memory_api.memories(self.store, self.namespace, mem_scopes),
            context=rc.context,
        )
        response = await model.complete(request)
        await self._commit_inference(rc, node, input_text, response, basis)

    async def _commit_inference(
        self,
        rc: _Run,
        node: LLMNode,
        input_text: str | None,
        response: ModelResponse,
        basis: int,
    ) -> None:
        calls = [
            {"id": c.id, "name": c.name, "arguments": jsonable(dict(c.arguments))}
            for c in response.tool_calls
        ]
        payload: dict[str, Any] = {"run": rc.run_id, "llm": node.name}
        if input_text is not None:
            payload["input"] = input_text
        payload.update(
            content=response.content if response.content is not None or calls else "",
            tool_calls=calls,
            usage=jsonable(dict(response.usage)),
        )
        memories: list[tuple[str, str, Any]] = []
        rejected: list[dict[str, Any]] = []
        for m in response.memories:
            try:
                self.vocabulary.check(m.type)
                if not isinstance(m.key, str) or not m.key:
                    raise InvalidNode("a memory key is a non-empty string", code="semantic_payload")
                memories.append((m.type, m.key, jsonable(m.content)))
            except InvalidNode as e:
                rejected.append({"type": str(m.type), "key": str(m.key), "error": e.message})
        if rejected:
            log.warning("run %s: model memories rejected: %s", rc.run_id, rejected)
            payload["memory_rejected"] = rejected
        mem_scope = scopes.user(rc.user) if rc.user else rc.scope
        # A final answer with no edge to follow ends the run: the answer joins this
        # commit (one fsync less per turn, and no moment with an answer-less reply).
        ends_run = not calls and not self.spec.outgoing(node.name)

        async def build(txn: Transaction) -> bool:
            inf = await txn.append(rc.scope, "inference", payload)
            # Memories first: in the thread scope their parent is the inference, not its calls.
            for type_, key, content in memories:
                await txn.semantic(mem_scope, type_, key, content)
            for c in calls:
                tool = self.tools.get(c["name"])
                await txn.append(
                    rc.scope,
                    "tool_call",
                    {
                        "run": rc.run_id,
                        "llm": node.name,
                        "call_id": c["id"],
                        "name": c["name"],
                        "arguments": c["arguments"],
                        "needs_approval": bool(tool and tool.needs_approval),
                    },
                    parents=[inf.id],
                )
            if ends_run:
                await txn.append(
                    rc.scope, "answer", {"run": rc.run_id, "output": payload["content"]}
                )
            return True

        await self._commit(rc, build, expect=basis)

    # -- tools ----------------------------------------------------------------------

    async def _run_calls(self, rc: _Run, calls: Sequence[Call]) -> None:
        """Execute calls concurrently; each result is committed as soon as it is in."""
        await asyncio.gather(*(self._run_call(rc, c) for c in calls))

    async def _run_call(self, rc: _Run, call: Call) -> None:
        if call.name in self.memory_tools and call.decision != "rejected":
            problem = await self._run_memory_call(rc, call)
            if problem is None:
                return
            content, is_error = problem, True
        elif call.decision == "rejected":
            content, is_error = "A human rejected this call.", True
        else:
            tool = self.tools.get(call.name)
            if tool is None:
                content = (
                    f"Unknown tool {call.name!r}; available: {', '.join(self.tools) or 'none'}."
                )
                is_error = True
            else:
                try:
                    content = await tool.invoke(
                        call.arguments, idempotency_key=call.node.id, context=rc.context
                    )
                    is_error = False
                except ToolArgumentsError as e:
                    content, is_error = f"Invalid arguments for {call.name}: {e}", True
                except Exception as e:  # the model sees the failure and can react to it
                    log.info("tool %s failed in run %s: %r", call.name, rc.run_id, e)
                    content, is_error = f"{type(e).__name__}: {e}", True
        payload = _result_payload(call, content, is_error=is_error)
        parents = [call.node.id] + ([call.verification.id] if call.verification else [])

        async def build(txn: Transaction) -> bool:
            current = rc.view.calls.get(call.node.id)
            if current is None or current.result is not None:
                return False  # another process finished this call first: its result stands
            await txn.append(rc.scope, "tool_result", payload, parents=parents)
            return True

        await self._commit(rc, build, expect=None)

    async def _run_memory_call(self, rc: _Run, call: Call) -> str | None:
        """An agent-memory edit and its result in one commit; the error text if it failed."""
        memory = self.memory_tools[call.name].bind(
            self.store, self.namespace, thread=rc.thread, user=rc.user
        )
        if isinstance(memory, str):
            return memory
        failure: list[str] = []

        async def build(txn: Transaction) -> bool:
            current = rc.view.calls.get(call.node.id)
            if current is None or current.result is not None:
                return False
            try:
                content = await memory.call(call.name, call.arguments, txn=txn)
            except TetherError as e:
                failure.append(e.message)
                return False  # the staged edit is dropped with this transaction
            await txn.append(
                rc.scope,
                "tool_result",
                _result_payload(call, jsonable(content), is_error=False),
                parents=[call.node.id, *([call.verification.id] if call.verification else [])],
            )
            return True

        await self._commit(rc, build, expect=None)
        return failure[-1] if failure else None


def _result_payload(call: Call, content: Any, *, is_error: bool) -> dict[str, Any]:
    p = call.node.payload
    out: dict[str, Any] = {
        "run": p["run"],
        "llm": p.get("llm"),
        "call_id": call.call_id,
        "name": call.name,
        "content": content,
        "is_error": is_error,
    }
    if p.get("node") is not None:
        out["node"] = p["node"]
    return out


async def _record(txn: Transaction, rc: _Run, node: str, output: Any) -> None:
    await txn.append(
        rc.scope,
        "resource",
        {"run": rc.run_id, "node": node, "output": output},
        resource_key=step_key(rc.run_id, node),
    )


def _moved(a: Head, b: Head) -> bool:
    return (a.generation, a.sequence) != (b.generation, b.sequence)


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return orjson.dumps(jsonable(v)).decode()


def _visit_input(view: RunView, visit: Visit) -> Any:
    """What an LLM visit was fed: its first inference's input, else the goal's input."""
    if visit.inferences and "input" in visit.inferences[0].payload:
        return visit.inferences[0].payload["input"]
    return view.goal.payload.get("input")


def _fed(view: RunView, visit: Visit) -> Any:
    """What a completed visit was fed, for the conditions on its edges."""
    if visit.kind == "llm":
        return _visit_input(view, visit)
    if visit.kind == "tool" and visit.calls:
        return visit.calls[0].arguments
    return None


def _render_tree(tree: Any, scope: Mapping[str, Any]) -> Any:
    if isinstance(tree, Template):
        return tree.value(scope)
    if isinstance(tree, Mapping):
        return {k: _render_tree(v, scope) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_render_tree(v, scope) for v in tree]
    return tree
