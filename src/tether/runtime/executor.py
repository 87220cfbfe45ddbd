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
    resource (step record)     a var / var_set node ran (with the variable it wrote),
                               or a loop iteration starts / the loop ends
    answer | protocol_error    the run completed or failed

A commit that changes the run's status (or what it waits for) also appends the
run's entry of the namespace's run index (``tether.control.tasks``, app scope),
so the index and the thread agree at every commit boundary. A tool's own state
(``tool_state``) is committed with its result, and the credentials a call
resolves from ``context["credentials"]`` or the agent's ``CredentialProvider``
reach only that tool: they are taken out of the context everything else sees and
scrubbed from whatever the call writes or logs.

A tool call node is committed before the tool runs; its id is the idempotency key
the tool receives, so a call that was running when the process died is re-issued
with the same key by whichever process resumes the run. If another writer moved
the thread meanwhile, the commit raises ``Conflict``, nothing is written, and the
executor re-derives from the new graph (a stale model response is dropped; a tool
result is dropped if the call already has one).

Running tool calls and committing their results is ``tool_calls.ToolCalls``; what
the executor knows of a run it drives is ``run_context.RunContext``.

Unlike seed 000's executor, nothing here stores executor state or a step index:
status and the next step are always derived, and each step writes only its new
nodes (not four whole state blobs).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import orjson

from ..control.owners import thread_owner
from ..control.tasks import entry_key, run_entry, stage_entry
from ..core import scopes
from ..core.errors import Conflict, InvalidNode, NotFound, TetherError
from ..core.graph import CausalNode
from ..core.messages import MessageList, Model, ModelRequest, ModelResponse, ReadOnlyDict
from ..core.vocab import Vocabulary
from ..crypto import bind_thread, encrypted, erased_placeholders
from ..models.errors import ModelError
from ..projections import ConversationView, Variables, conversation_view
from ..projections.projection import summary_message
from ..projections.runs import CALL_SCOPED, StepResult, is_run_goal, run_of
from ..store.base import Head, Store
from ..store.txn import Transaction
from . import _observe
from . import agent_memory_api as _memory_api
from .agent_memory_tools import MemoryTools
from .credentials import (
    CredentialProvider,
    check_not_persisted,
    split_context,
)
from .errors import AgentError, ApprovalError, RunSuspendedError, SpecError
from .plan import (
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
from .recall_tool import RecallMemory
from .run_context import RunContext
from .spec import ChatHistoryNode, LLMNode, LoopNode, Spec, ToolNode, VarNode, VarSetNode
from .templates import Condition, Template
from .tool_calls import ToolCalls, result_payload
from .tools import Tool, exact_json, jsonable

log = logging.getLogger("tether.runtime")

_PAGE: Final = 500
# protocol_error codes of a run ended by an exception that is not a TetherError.
MODEL_RAISED: Final = "model_raised"
UNEXPECTED: Final = "unexpected_error"
_ATTEMPTS: Final = 50
_TIPS: Final = 4096  # threads whose last run an agent finished, remembered (``_tips``)
# Node kinds that can change a run's status (or what it waits for).
_STATUS_KINDS: Final = frozenset(
    {"tool_call", "tool_result", "verification", "answer", "protocol_error"}
)


_NO_OUTPUT: Any = object()  # a template outside a condition has no `output`


class Executor(ToolCalls):
    """Drives runs of one spec against one store namespace.

    Between calls it keeps only ``_tips`` (the ``Agent``'s, which makes one executor
    per call): for a thread whose latest run it finished, the head its last read or
    commit there showed (not on an encrypted store, ``_remember_tip``). The next step
    starts from that head without reading the thread; its first commit checks the
    head, so a thread that moved since (another process, a reset) is a ``Conflict``,
    and the step reads it afresh and decides again.
    """

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
        recall_memory: RecallMemory | None = None,
        max_steps: int,
        max_tool_rounds: int,
        credentials: CredentialProvider | None = None,
        name: str = "agent",
        tips: dict[str, Head] | None = None,
        conversation: bool = True,
    ) -> None:
        self.name = name
        # False: the agent's ``state`` leaves seed 002's conversation module out, so no
        # earlier run's messages are sent (each turn starts cold, as the seed's agent
        # without it); each LLM node sees its own run as with memory_scope="session".
        self.conversation = conversation
        self.spec = spec
        self.credential_provider = credentials
        self.store = store
        self.namespace = namespace
        self.model = model
        self.models = dict(models)
        self.tools = dict(tools)
        self.memory_tools = dict(memory_tools)
        self.recall_memory = recall_memory
        self.vocabulary = vocabulary
        self.max_steps = max_steps
        self.max_tool_rounds = max_tool_rounds
        # thread scope -> a head at which its latest run is finished (oldest first); the
        # agent passes its own, kept across its calls
        self._tips: dict[str, Head] = {} if tips is None else tips

    # -- entry points ----------------------------------------------------------------

    @_observe.invoke_agent("step")
    async def step(
        self,
        input: Any,
        *,
        thread: str | None,
        user: str | None,
        context: dict[str, Any],
        metadata: Mapping[str, Any] | None,
        owner: str | None = None,
    ) -> StepResult:
        # A run with no thread is its own thread (seed 004; docs/graph-encoding.md).
        own = None if thread is not None else "run_" + secrets.token_hex(12)
        thread = own or thread
        assert thread is not None
        scope = scopes.thread(thread)
        if user is not None:
            scopes.user(user)
        # A malformed context["credentials"] fails before any write, and so does a
        # credential's value in what this step would store in clear or not.
        _, supplied = split_context(context)
        payload_input = exact_json(input, "input")
        meta = {**exact_json(dict(metadata or {}), "metadata"), "user": user}
        check_not_persisted(
            "the step's input, metadata or ids",
            [payload_input, meta, thread, user],
            supplied.values(),
        )
        if user is not None:
            # Before the thread's first write, so an encrypted store seals it with the
            # user's data key and erase_user erases it too (free once bound; a no-op
            # unencrypted; a thread already written or owned by another user stays as is).
            await bind_thread(self.store, self.namespace, thread, user, strict=False)
        for _ in range(_ATTEMPTS):
            tip = self._tips.pop(scope, None)
            if tip is not None:
                # This executor finished the thread's latest run at ``tip``: a new run
                # starts there, no read. The goal's commit checks that head; if the
                # thread moved since, it conflicts and the next attempt reads it.
                head, view = tip, None
            else:
                head, view = await self._current(scope)
            if owner is not None and head.sequence > 0:
                # Checked at every attempt: the goal's commit is computed against this
                # head, so a first turn of another user that lands meanwhile makes it
                # conflict, and the next attempt sees whose thread it became.
                found = await thread_owner(self.store, self.namespace, thread)
                if found != owner:
                    raise Conflict(
                        f"thread {thread!r} is not {owner}'s: "
                        + ("it has no owner" if found is None else "another user owns it"),
                        code="thread_owned",
                        thread=thread,
                    )
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
            run_id = own or "run_" + secrets.token_hex(12)
            goal_llm = (
                self.spec.start if isinstance(self.spec.node(self.spec.start), LLMNode) else None
            )
            txn = Transaction(self.store, self.namespace, vocabulary=self.vocabulary)
            # From the head just read: the commit checks it (a moved thread: Conflict, retry).
            txn.seed(scope, head)
            goal = await txn.append(
                scope,
                "goal",
                {
                    "run": run_id,
                    "input": payload_input,
                    "llm": goal_llm,
                    "metadata": meta,
                    **_observe.trace_field(),
                },
            )
            # The run's index entry, in this thread's scope: the commit touches no other.
            # Its key names the new run (96 random bits), so it has no version yet: no
            # read of its head.
            txn.hint_resource(scope, entry_key(run_id), None, at=head)
            await stage_entry(txn, thread, RunView(goal=goal))
            try:
                written = await txn.commit()
            except Conflict:
                await asyncio.sleep(random.uniform(0, 0.002))
                continue
            rc = self._ctx(thread, scope, head, RunView(goal=goal), context)
            self._committed(rc, txn, head, written)
            return await self._drive(rc)
        raise Conflict(f"could not start a run on thread {thread!r}: it kept moving; retry")

    @_observe.invoke_agent("resume")
    async def resume(
        self, *, thread: str, context: dict[str, Any], run: str | None = None
    ) -> StepResult:
        scope = scopes.thread(thread)
        head, view = await self._current(scope, run)
        if view is None:
            what = f"no run {run!r}" if run is not None else "no run to resume"
            raise NotFound(f"thread {thread!r} has {what}", thread=thread, run=run)
        rc = self._ctx(thread, scope, head, view, context)
        if view.finished or view.status == "suspended":
            return self._result(rc)
        return await self._drive(rc)

    async def status(self, *, thread: str) -> RunView | None:
        return (await self._current(scopes.thread(thread)))[1]

    @_observe.invoke_agent("decide")
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
        head, view = await self._current(scope)
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
                    result_payload(call, f"A human rejected this call{why}.", is_error=True),
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
    ) -> RunContext:
        public, supplied = split_context(context)
        return RunContext(
            thread=thread,
            scope=scope,
            context=public,
            credentials=supplied,
            secrets={v for v in supplied.values() if isinstance(v, str)},
            view=view,
            generation=head.generation,
            seq=head.sequence,
            head=head,  # just read (or, for a new run, replaced by its goal's commit)
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
            with erased_placeholders(False):  # plans come from real payloads: KeyErased
                page = await self.store.nodes(
                    self.namespace, scope, before=before, limit=limit, descending=True
                )
            limit = min(limit * 2, _PAGE)
            if not page:
                break
            for n in page:
                collected.append(n)
                if is_run_goal(n) and (run_id is None or run_of(n) == run_id):
                    collected.reverse()
                    return n, collected
            before = page[-1].sequence
        return None, []

    async def _current(self, scope: str, run: str | None = None) -> tuple[Head, RunView | None]:
        """The thread's head now, and its latest run (or the run ``run``) as of that head
        (None: no such run)."""
        head = await self.store.head(self.namespace, scope)
        goal, nodes = await self._scan(scope, head, run)
        return head, None if goal is None else RunView.derive(goal, nodes)

    async def _sync(self, rc: RunContext, head: Head) -> None:
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
            rc.superseded = any(is_run_goal(n) and n.id != goal.id for n in nodes)
            return
        after = rc.seq
        while after < head.sequence:
            with erased_placeholders(False):  # even on a store opened to show placeholders
                page = await self.store.nodes(
                    self.namespace, rc.scope, after=after, before=head.sequence + 1, limit=_PAGE
                )
            if not page:
                break
            for n in page:
                rc.view.add(n)
                if is_run_goal(n) and n.id != rc.view.goal.id:
                    rc.superseded = True
            after = page[-1].sequence
        rc.seq = after

    # -- writing -------------------------------------------------------------------

    async def _commit(
        self,
        rc: RunContext,
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
                # The first attempt starts from the head the run knows (just read, or left
                # by its own last commit); the commit checks it. A retry reads afresh.
                known, rc.head = rc.head, None
                if known is not None:
                    txn.seed(rc.scope, known)
                head = await txn.head(rc.scope)
                await self._sync(rc, head)
                if expect is not None and len(rc.view.nodes) != expect:
                    return False
                if not await build(txn):
                    return False
                if rc.secrets:
                    for n in txn.pending():
                        check_not_persisted(
                            f"a {n.kind} node of run {rc.run_id}",
                            [n.resource_key, n.payload],
                            rc.secrets,
                        )
                await self._index(txn, rc)
                try:
                    written = await txn.commit()
                except Conflict:
                    await asyncio.sleep(random.uniform(0, 0.001 * 2 ** min(attempt, 7)))
                    continue
                self._committed(rc, txn, head, written)
                return True
        raise Conflict(f"thread {rc.thread!r} kept moving; the step was not written, retry")

    def _committed(
        self, rc: RunContext, txn: Transaction, head: Head, written: dict[str, list[CausalNode]]
    ) -> None:
        """Bring ``rc`` to the head ``txn``'s commit left, computed against ``head`` (the
        head ``rc.view`` was synced to): the next transaction may start from it."""
        mine = written.get(rc.scope, [])
        for n in mine:
            rc.view.add(n)
        after = txn.committed_head(rc.scope)
        base = txn.base(rc.scope)
        if after is None or base is None or _moved(base, head):
            # Nothing written to the thread (its head was not checked), or the commit
            # was computed against another head than the view's (a commit that finds
            # stored nodes replays against the heads first read, so not by that): read
            # again, and rescan the run when the view may lack nodes.
            rc.head, rc.entry = None, None
            if after is not None:
                rc.generation = -1
            else:
                rc.seq = head.sequence
            return
        rc.generation, rc.seq, rc.head = after.generation, after.sequence, after
        key = entry_key(rc.run_id)
        entries = [n.id for n in mine if n.resource_key == key]
        if entries:
            rc.entry = (after.generation, after.sequence, entries[-1])
        elif rc.entry is not None and rc.entry[:2] == (base.generation, base.sequence):
            rc.entry = (after.generation, after.sequence, rc.entry[2])
        else:
            rc.entry = None

    async def _index(self, txn: Transaction, rc: RunContext) -> None:
        """Add the run's index entry to ``txn`` when its nodes change the run's status."""
        new = [
            n
            for n in txn.pending(rc.scope)
            if isinstance(n.payload, dict) and n.payload.get("run") == rc.run_id
        ]
        if not any(n.kind in _STATUS_KINDS for n in new):
            return
        after = RunView.derive(rc.view.goal, [*rc.view.nodes, *new])
        if run_entry(after) != run_entry(rc.view):
            if rc.entry is not None:
                # The entry as this run's last commit left it, if the transaction is
                # computed against that very head (else ignored, and read).
                g, s, nid = rc.entry
                txn.hint_resource(
                    rc.scope, entry_key(rc.run_id), nid, at=Head(generation=g, sequence=s)
                )
            await stage_entry(txn, rc.thread, after)

    # -- driving -------------------------------------------------------------------

    async def _drive(self, rc: RunContext) -> StepResult:
        """Run until the run completes, fails or waits for an approval."""
        while True:
            # Right after a commit of this run (or a read) the thread's head is known: the
            # state it shows is one a read could have returned, and every step's commit
            # re-checks the head it is computed against.
            if rc.head is None:
                rc.head = await self.store.head(self.namespace, rc.scope)
            known = rc.head
            await self._sync(rc, known)
            basis = len(rc.view.nodes)
            action = next_action(
                rc.view, max_steps=self.max_steps, max_tool_rounds=self.max_tool_rounds
            )
            if isinstance(action, Finish | Suspend):
                if rc.view.finished and not rc.superseded:
                    self._remember_tip(rc.scope, known)
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
            except Exception as e:
                # Anything else (a bug in a template filter, a malformed model response):
                # the run fails with a typed node and the thread goes on. A store that
                # cannot be written fails the _fail commit too, and that propagates.
                log.exception("run %s: unexpected %s", rc.run_id, type(e).__name__)
                await self._fail(rc, UNEXPECTED, f"{type(e).__name__}: {e}", basis)
            if rc.head is known:
                rc.head = None  # nothing learnt since: the next round reads the head

    def _remember_tip(self, scope: str, head: Head) -> None:
        """``scope``'s latest run is finished at ``head`` (a head it had: read, or left by
        this executor's commit), where the next step may start (``step``).

        Not on an encrypted store: erasing a user (``tether.crypto.erase_user``, from any
        process) leaves the thread's head where it was, and only reading the thread
        finds it erased (``KeyErased``, nothing written)."""
        if encrypted(self.store) is not None:
            return
        tips = self._tips
        tips.pop(scope, None)
        tips[scope] = head
        if len(tips) > _TIPS:
            # the oldest first; pop(k, None): step_sync calls may share the agent's dict
            for k in list(tips)[: len(tips) - _TIPS]:
                tips.pop(k, None)

    def _result(self, rc: RunContext) -> StepResult:
        return rc.view.result(rc.thread)

    async def _fail(self, rc: RunContext, code: str, message: str, expect: int) -> None:
        log.info("run %s failed: [%s] %r", rc.run_id, code, message)

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
        self,
        rc: RunContext,
        *,
        input: Any = None,
        output: Any = _NO_OUTPUT,
        node: str | None = None,
        loop_index: int | None = None,
    ) -> dict[str, Any]:
        """What a template sees. ``output`` only where it exists (conditions: edges and
        loops); elsewhere naming it raises like any unknown name, never renders None."""
        variables: dict[str, Any] = {}
        if self.spec.template_variables == "session":
            # Seed 004's namespace: run (session) variables; the others are read through
            # their var node's output (``nodes.<var node>.output``).
            v = self._variables(rc)
            for d in self.spec.var_decls:
                if d.scope == "run":
                    variables[d.name] = await v.get(d.name)
        elif self.spec.var_decls:
            v = self._variables(rc)
            if rc.user is not None or all(d.scope != "user" for d in self.spec.var_decls):
                variables = await v.all()
            else:
                # No user: user-scoped variables stay undefined (a template naming one
                # fails with its name) instead of failing every template.
                for d in self.spec.var_decls:
                    if d.scope != "user":
                        variables[d.name] = await v.get(d.name)
        scope: dict[str, Any] = {
            "input": input,
            "variables": variables,
            "nodes": rc.view.outputs(rc.held),
            "context": rc.context,
            "run": rc.run_id,
            "thread": rc.thread,
        }
        if output is not _NO_OUTPUT:
            scope["output"] = output
        # Inside a loop body (and in a loop's own condition) templates see the
        # iteration: ``loop_index`` (seed 004 also offers it as variables.loop_index)
        # and, for nested loops, ``loops.<name>.index``.
        if node is not None:
            around = self.spec.loops_around(node)
            loops = {
                name: {"index": i} for name in around if (i := rc.view.loop_index(name)) is not None
            }
            if loop_index is None and around and around[0] in loops:
                loop_index = loops[around[0]]["index"]
            if loops:
                scope["loops"] = loops
        if loop_index is not None:
            scope["loop_index"] = loop_index
            if "loop_index" not in variables:
                scope["variables"] = {**variables, "loop_index": loop_index}
        return scope

    def _variables(self, rc: RunContext) -> Variables:
        if rc.variables is None:
            rc.variables = Variables(
                self.store,
                self.namespace,
                self.spec.var_decls,
                thread=rc.thread,
                user=rc.user,
                run=rc.run_id,
                erased_as_default=True,  # an erased user's values are gone: defaults again
            )
        return rc.variables

    # -- routing between spec nodes -------------------------------------------------

    async def _route(self, rc: RunContext, visit: Visit | None, basis: int) -> None:
        if visit is None:
            await self._enter(rc, self.spec.start, rc.view.goal.payload.get("input"), basis, True)
            return
        if visit.node not in self.spec:
            raise SpecError(
                f"the run executed node {visit.node!r}, which this spec lacks; "
                "resume it with the spec that started it"
            )
        if visit.output is CALL_SCOPED:
            visit = _held(rc, visit)
        if visit.kind == "loop" and not visit.done:
            # An iteration was committed: its body runs, fed the iteration's input.
            loop = self.spec.node(visit.node)
            assert isinstance(loop, LoopNode)
            await self._enter(rc, loop.body, visit.output, basis, False)
            return
        edges = self.spec.outgoing(visit.node)
        target = None
        if edges:
            scope = await self._template_scope(
                rc, input=_fed(rc.view, visit), output=visit.output, node=visit.node
            )
            for edge, cond in edges:
                if cond is None or cond.test(scope):
                    target = edge.dst
                    break
        # A finished loop routes by its own edges like any node; inside an outer loop's
        # body, a node with nowhere to go ends that loop's iteration.
        owner = self.spec.loop_of(visit.node)
        if owner is not None and (target is None or target == owner):
            # The body path ended: the loop decides on the next iteration.
            current = rc.view.loop_index(owner)
            await self._loop_step(rc, owner, (current or 0) + 1, visit.output, basis)
            return
        if target is None:
            output = jsonable(visit.output)

            async def build(txn: Transaction) -> bool:
                await txn.append(rc.scope, "answer", {"run": rc.run_id, "output": output})
                return True

            await self._commit(rc, build, expect=basis)
            return
        await self._enter(rc, target, visit.output, basis, False)

    async def _loop_step(
        self, rc: RunContext, name: str, iteration: int, feed: Any, basis: int
    ) -> None:
        """Commit iteration ``iteration`` of loop ``name`` (before its body runs), or its end."""
        loop = self.spec.node(name)
        assert isinstance(loop, LoopNode)
        go = iteration < loop.max_iterations
        if go:
            cond = self.spec.template(name, "condition")
            assert isinstance(cond, Condition)
            scope = await self._template_scope(
                rc, input=feed, output=feed, node=name, loop_index=iteration
            )
            go = cond.test(scope)
        value = jsonable(feed)

        async def build(txn: Transaction) -> bool:
            await txn.append(
                rc.scope,
                "resource",
                {
                    "run": rc.run_id,
                    "node": name,
                    "loop": {"iteration": iteration, "done": not go},
                    "output": value,
                },
                resource_key=step_key(rc.run_id, name),
            )
            return True

        await self._commit(rc, build, expect=basis)

    async def _enter(self, rc: RunContext, name: str, feed: Any, basis: int, first: bool) -> None:
        node = self.spec.node(name)
        visits = len(rc.view.visits)
        if isinstance(node, LoopNode):
            await self._loop_step(rc, name, 0, feed, basis)
            return
        if isinstance(node, LLMNode):
            text: str | None = None
            if not first:
                tmpl = self.spec.template(name, "input")
                if tmpl is not None:
                    text = tmpl.render(await self._template_scope(rc, input=feed, node=name))
                else:
                    text = _text(feed)
            await self._infer(rc, node, text, feed if text is None else text, basis)
            return
        if isinstance(node, ToolNode):
            tool = self.tools[node.tool_name]
            tree = self.spec.template(name, "arguments")
            if tree is not None:
                args = _render_tree(tree, await self._template_scope(rc, input=feed, node=name))
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
        if isinstance(node, ChatHistoryNode):
            history = await self._chat_history(rc, node)

            async def build_history(txn: Transaction) -> bool:
                await _record(txn, rc, name, history)
                return True

            await self._commit(rc, build_history, expect=basis)
            return
        if isinstance(node, VarNode):
            value = jsonable(await self._variables(rc).get(node.var_name))
            call = self._variables(rc).decl(node.var_name).scope == "call"

            async def build_read(txn: Transaction) -> bool:
                await _record(txn, rc, name, value, call=call)
                return True

            await self._commit(rc, build_read, expect=basis)
            return
        assert isinstance(node, VarSetNode)
        tmpl = self.spec.template(name, "value")
        assert isinstance(tmpl, Template)
        value = jsonable(tmpl.value(await self._template_scope(rc, input=feed, node=name)))
        variables = self._variables(rc)

        call = variables.decl(node.var).scope == "call"

        async def build_set(txn: Transaction) -> bool:
            written = await variables.set(node.var, value, txn=txn)
            await _record(txn, rc, name, jsonable(written.value), call=call)
            return True

        await self._commit(rc, build_set, expect=basis)

    async def _chat_history(self, rc: RunContext, node: ChatHistoryNode) -> list[Any]:
        """A chat_history node's output: ``node.llm``'s messages in this thread (or run)."""
        view = await conversation_view(
            self.store, self.namespace, rc.thread, llm=node.llm, run=rc.run_id
        )
        if node.scope == "thread":
            messages = [m for m in view.messages if m.get("role") != "system"]
        else:
            messages = [m for u in view.units if u.run == rc.run_id for m in u.messages]
        if node.last is not None:
            messages = messages[len(messages) - node.last :] if node.last else []
        return [jsonable(dict(m)) for m in messages]

    # -- the model ----------------------------------------------------------------

    async def _infer(
        self, rc: RunContext, node: LLMNode, input_text: str | None, visit_input: Any, basis: int
    ) -> None:
        model = self.models.get(node.model, self.model) if node.model else self.model
        scope = await self._template_scope(rc, input=visit_input, node=node.name)
        prompt: list[dict[str, Any]] = []
        tmpl = self.spec.template(node.name, "system")
        if tmpl is not None:
            # Rendered per call and never stored: a system prompt may quote the context.
            prompt.append(ReadOnlyDict(role="system", content=tmpl.render(scope)))
        mem_scope = _memory_scope(node, self.conversation)
        whole = mem_scope == "thread"
        view = await conversation_view(
            self.store,
            self.namespace,
            rc.thread,
            llm=node.name,
            policy=self.spec.policy(node.name),
            run=rc.run_id,
            model=model,
            # the head the run's view is at (just read, or left by its own last commit):
            # the inference's commit is computed against it and checks it
            at=rc.head,
            units=not whole,  # _remembered: thread scope takes all
            # thread scope: the prompt first, and the view's list is the request's (a
            # whole buffer of a long thread: brought forward in place, not copied)
            lead=prompt if whole else None,
        )
        messages: list[dict[str, Any]] = (
            view.messages if whole else [*prompt, *_remembered(rc, node, view, mem_scope)]
        )
        # A summary policy may have committed a summary node: that moves the thread,
        # not the run. Anything new in the run means the plan is stale.
        # The view's own head (read after any summary it committed), not a new read; the
        # inference's commit starts from it too.
        head = view.head or await self.store.head(self.namespace, rc.scope)
        await self._sync(rc, head)
        if len(rc.view.nodes) != basis:
            return
        rc.head = head
        if input_text is not None:
            messages = [*messages, ReadOnlyDict(role="user", content=input_text)]
        names = [*self.tools, *self.memory_tools] if node.tools is None else list(node.tools)
        specs = {s.name: s for m in self.memory_tools.values() for s in m.specs}
        mem_scopes = ["app", *([scopes.user(rc.user)] if rc.user else []), rc.scope]
        request = ModelRequest(
            # read-only, the messages too: the model cannot change what the process keeps
            # (MessageList of ReadOnlyDict, made so by the projection)
            messages=messages if isinstance(messages, MessageList) else MessageList(messages),
            tools=[self.tools[n].spec if n in self.tools else specs[n] for n in names],
            memory=await _memory_api.memories(self.store, self.namespace, mem_scopes)
            if self.recall_memory is None
            else await self.recall_memory.memories(
                self.store,
                self.namespace,
                rc.view.goal.payload.get("input"),
                thread_scope=rc.scope,
                user=rc.user,
            ),
            context=rc.context,
        )
        try:
            response = await _observe.complete(model, request, rc.credentials.values())
        except TetherError:
            raise
        except Exception as e:
            # A model is code too (a client, a router, a test double): whatever it raises
            # ends this run, typed, instead of leaving it open for every later step.
            raise ModelError(
                f"the model raised {type(e).__name__}: {e}",
                code=MODEL_RAISED,
                exception=type(e).__name__,
            ) from e
        await self._commit_inference(rc, node, input_text, response, basis)

    async def _commit_inference(
        self,
        rc: RunContext,
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
            log.warning("run %s: model memories rejected: %r", rc.run_id, rejected)
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


async def _record(
    txn: Transaction, rc: RunContext, node: str, output: Any, *, call: bool = False
) -> None:
    """A var / var_set step's record. On a call-scoped variable it stores no value (call
    scope is never persisted): the output is held by this call only (``rc.held``)."""
    payload = {"run": rc.run_id, "node": node, **({"call": True} if call else {"output": output})}
    record = await txn.append(rc.scope, "resource", payload, resource_key=step_key(rc.run_id, node))
    if call:
        rc.held[record.id] = output


def _held(rc: RunContext, visit: Visit) -> Visit:
    """``visit`` (a step on a call-scoped variable) with the output this call holds."""
    if visit.record not in rc.held:
        raise AgentError(
            f"run {rc.run_id} stopped right after node {visit.node!r} ran on a call-scoped "
            "variable, whose value lived only in the call that ran it (call scope is never "
            "stored); a later call cannot continue from it: step again",
            code="call_scope_ended",
            run=rc.run_id,
            node=visit.node,
        )
    return dataclasses.replace(visit, output=rc.held[visit.record])


def _memory_scope(node: LLMNode, conversation: bool) -> str:
    """``node``'s memory scope; "session" at widest when the conversation is disabled."""
    if not conversation and node.memory_scope == "thread":
        return "session"
    return node.memory_scope


def _remembered(
    rc: RunContext, node: LLMNode, view: ConversationView, scope: str
) -> list[dict[str, Any]]:
    """What of its conversation ``node`` is sent, by its memory ``scope`` (seed 004)."""
    if scope == "thread":
        return view.messages
    units = [u for u in view.units if u.run == rc.run_id]
    if scope == "call":
        # Only the node's current execution: the run's input when the run started here,
        # and the inferences (with their tool results) of this visit.
        visits = [v for v in rc.view.visits if v.node == node.name and v.kind == "llm"]
        visit = visits[-1] if visits else None
        if visit is not None and visit.complete:
            visit = None  # a new visit is starting: nothing of it is in the graph yet
        start = visit.inferences[0].sequence if visit and visit.inferences else None
        first = visit.index == 0 if visit is not None else not rc.view.visits
        units = [
            u
            for u in units
            if (start is not None and u.anchor >= start)
            or (first and u.anchor == rc.view.goal.sequence)
        ]
    # The stored system prompt stays; the summary of earlier runs does not apply.
    prefix = view.messages[: len(view.messages) - view.kept]
    if view.summary is not None and view.summary.text:
        prefix = [m for m in prefix if m != summary_message(view.summary.text)]
    return [*prefix, *(m for u in units for m in u.messages)]


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
    if visit.kind == "loop":
        return visit.output
    return None


def _render_tree(tree: Any, scope: Mapping[str, Any]) -> Any:
    if isinstance(tree, Template):
        return tree.value(scope)
    if isinstance(tree, Mapping):
        return {k: _render_tree(v, scope) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_render_tree(v, scope) for v in tree]
    return tree
