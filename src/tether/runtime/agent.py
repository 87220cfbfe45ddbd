"""``Agent``: a spec, a model, tools and a store; ``step`` runs one turn.

    agent = tether.Agent(spec, tether.ScriptedModel.demo(), store="sqlite:///agent.db",
                         tools=[get_weather])
    result = await agent.step("What's the weather in Paris?", thread="t1", user="alice",
                              context={"request_id": "r-17"})
    result.status, result.answer, result.pending_approvals

    await agent.approve("t1", result.pending_approvals[0].call_id)   # any process, later
    await agent.resume("t1")                                         # after a crash

Everything durable is in the store's causal graph (docs/graph-encoding.md); an
Agent object holds configuration only, so any process with the same spec and
store can continue any thread. ``context`` reaches templates, conditions, tools
and the model and is never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, TypeVar, overload

from ..control.modules import check_modules
from ..control.tasks import RunList, TaskState, list_index
from ..control.tasks import runs as control_runs
from ..control.tasks import task as control_task
from ..control.types import StateOperationResult
from ..core import scopes
from ..core.errors import InvalidRequest, NotFound
from ..core.messages import Model
from ..core.vocab import NodeType, Vocabulary
from ..models.config import model_from_config
from ..projections.runs import PendingApproval, StepResult
from ..store import Store, open_store
from ..store.base import Head, check_name
from .agent_memory_tools import MemoryTools, memory_tools
from .credentials import CredentialProvider
from .errors import AgentError, RunSuspendedError, SpecError
from .executor import Executor
from .recall_tool import RecallMemory
from .spec import Spec, ToolNode, check_tools
from .tool_state import ToolState
from .tools import Tool, as_tool, resolve_tools

__all__ = ["Agent"]

T = TypeVar("T")
# Protolink's ``invoke()`` default session: what calls that name none share.
INVOKE_SESSION: Final = "invocation_session_id"
ToolLike = Tool | Callable[..., Any]


class Agent:
    """An agent: runs turns of ``spec`` with ``model`` over the threads of ``store``.

    ``spec``: a ``Spec``, a YAML file or directory, or None for one LLM node named
    ``agent`` offered every tool. ``model``: any ``Model`` (``ScriptedModel``,
    ``OpenAIModel``) or a model config mapping; ``models`` names more of them for
    LLM nodes with ``model: <name>``. ``store``: a ``Store`` or a URL (opened on first
    use, closed by ``close()``); the default ``memory://`` does not survive the
    process, ``sqlite:///path.db`` does. ``node_types`` and
    ``allow_dynamic_node_types`` set which semantic memory types the model may write;
    ``agent_memory`` gives the model its own key-value memories as tools (``MemoryTools``).
    ``recall_memory`` (``RecallMemory``) shows the model the memories closest in meaning
    to the run's input instead of the whole semantic memory.
    ``max_steps`` bounds the node executions of one run and ``max_tool_rounds`` the
    model calls of one LLM node visit. ``credentials``: a ``CredentialProvider``
    asked first for the credentials tools declare (``context["credentials"]`` is
    the fallback); they are never persisted. ``name``: the agent's name in traces
    (``gen_ai.agent.name``, docs/telemetry.md). ``state``: the stores (seed 002's
    modules: ``conversation``, ``tools``, ``task``, ``flow``, ...) ``describe_state``,
    ``reset_state`` and ``compact_state`` act on and report, as Protolink's
    ``Agent(state=[...])``; others are reported disabled (``tether.control.modules``).
    Without ``conversation`` among them the model is sent no earlier run's messages
    (each turn starts cold, as the seed's agent without its conversation module); the
    graph still records every run.
    ``default_thread``: the thread of a ``step`` that names none; None, the default,
    makes such a step a thread of its own (named by its run id, as Protolink's external
    task falls back to its task id); True makes a fresh one for this Agent object
    (``"session_<hex>"``, ``agent.default_thread``), as Liman's agent keeps one session:
    its steps without a thread continue it, another Agent object starts its own.
    ``invoke(message, session_id=None)`` is Protolink's entry point: without a session
    it uses ``default_thread`` or Protolink's shared ``"invocation_session_id"``.
    """

    def __init__(
        self,
        spec: Spec | str | Path | None = None,
        model: Model | Mapping[str, Any] | None = None,
        *,
        store: Store | str = "memory://",
        namespace: str = "default",
        tools: Sequence[ToolLike] | Mapping[str, ToolLike] | None = None,
        models: Mapping[str, Model | Mapping[str, Any]] | None = None,
        node_types: Iterable[NodeType | str] | None = None,
        allow_dynamic_node_types: bool = False,
        agent_memory: MemoryTools | Sequence[MemoryTools] | None = None,
        recall_memory: RecallMemory | None = None,
        max_steps: int = 50,
        max_tool_rounds: int = 20,
        credentials: CredentialProvider | None = None,
        name: str = "agent",
        state: Iterable[str] | None = None,
        default_thread: str | Literal[True] | None = None,
    ) -> None:
        if credentials is not None and not isinstance(credentials, CredentialProvider):
            raise InvalidRequest(
                "credentials is a CredentialProvider: an object with "
                f"`async resolve(name, context) -> str | None`, got {credentials!r}"
            )
        self.credentials = credentials
        if not isinstance(name, str) or not name:
            raise InvalidRequest(
                f"name is a non-empty string (the agent's name in traces), got {name!r}"
            )
        self.name = name
        # Seed 002's modules: the stores describe/reset/compact act on (None: all).
        self.state_modules = check_modules(state)
        if default_thread is True:
            # Liman's agent session: this object's own, fresh; unguessable, so no other
            # Agent object (another user's, another process's) meets it by chance.
            default_thread = "session_" + secrets.token_hex(12)
        elif default_thread is not None:
            scopes.thread(default_thread)
        self.default_thread: str | None = default_thread
        if spec is None:
            spec = Spec.single()
        elif isinstance(spec, str | Path):
            spec = Spec.from_yaml(spec)
        elif not isinstance(spec, Spec):
            raise SpecError(f"spec is a Spec, a YAML path or None, got {spec!r}")
        self.spec = spec
        if model is None:
            raise InvalidRequest(
                "Agent needs a model: tether.ScriptedModel(...) offline, "
                "tether.OpenAIModel(...) for an OpenAI-compatible server"
            )
        self.model = _model(model, "model")
        self.models = {k: _model(v, f"models[{k!r}]") for k, v in (models or {}).items()}
        for n in spec.llm_nodes:
            if n.model is not None and n.model not in self.models:
                raise SpecError(
                    f"llm node {n.name!r} uses model {n.model!r}; pass it in "
                    f"Agent(models={{{n.model!r}: ...}}) (known: {', '.join(self.models) or 'none'})"
                )
        self.tools = resolve_tools(tools)
        for tn in spec.nodes:
            if isinstance(tn, ToolNode) and not isinstance(tn.tool, str):
                t = as_tool(tn.tool)
                existing = self.tools.setdefault(t.name, t)
                if existing.fn is not t.fn:
                    raise SpecError(
                        f"tool node {tn.name!r} brings a tool named {t.name!r}, "
                        "but the agent already has a different tool of that name"
                    )
        self.memory_tools = memory_tools(agent_memory)
        if recall_memory is not None and not isinstance(recall_memory, RecallMemory):
            raise SpecError(f"recall_memory is a RecallMemory, got {recall_memory!r}")
        self.recall_memory = recall_memory
        if clash := sorted(set(self.tools) & set(self.memory_tools)):
            raise SpecError(
                f"tool name(s) {', '.join(clash)} are taken by an agent memory; rename the tool"
            )
        check_tools(spec, {*self.tools, *self.memory_tools})
        self.namespace = check_name("namespace", namespace)
        self.vocabulary = Vocabulary(node_types, allow_dynamic=allow_dynamic_node_types)
        if max_steps < 1 or max_tool_rounds < 1:
            raise InvalidRequest("max_steps and max_tool_rounds are at least 1")
        self.max_steps = max_steps
        self.max_tool_rounds = max_tool_rounds
        if isinstance(store, str):
            self._store_url: str | None = store
            self._store: Store | None = None
        elif isinstance(store, Store):
            self._store_url, self._store = None, store
        else:
            raise InvalidRequest(f"store is a Store or a URL, got {store!r}")
        # thread scope -> a head at which this agent finished its latest run, where the
        # next step there starts (``Executor``; the goal's commit checks it)
        self._tips: dict[str, Head] = {}

    def __repr__(self) -> str:
        return f"Agent(start={self.spec.start!r}, tools={list(self.tools)!r})"

    # -- store lifecycle

    async def _get_store(self) -> Store:
        if self._store is None:
            assert self._store_url is not None
            self._store = await open_store(self._store_url)
        return self._store

    async def close(self) -> None:
        """Close the store if the agent opened it from a URL."""
        if self._store_url is not None and self._store is not None:
            store, self._store = self._store, None
            self._tips.clear()  # heads of that store
            await store.close()

    async def __aenter__(self) -> Agent:
        await self._get_store()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _executor(self, store: Store) -> Executor:
        return Executor(
            spec=self.spec,
            store=store,
            namespace=self.namespace,
            model=self.model,
            models=self.models,
            tools=self.tools,
            memory_tools=self.memory_tools,
            recall_memory=self.recall_memory,
            vocabulary=self.vocabulary,
            max_steps=self.max_steps,
            max_tool_rounds=self.max_tool_rounds,
            credentials=self.credentials,
            name=self.name,
            tips=self._tips,
            conversation=self.state_modules is None or "conversation" in self.state_modules,
        )

    async def _with(self, fn: Callable[[Executor], Awaitable[T]]) -> T:
        return await fn(self._executor(await self._get_store()))

    # -- turns

    async def step(
        self,
        input: Any,
        *,
        thread: str | None = None,
        user: str | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        owner: str | None = None,
    ) -> StepResult:
        """Run one turn on ``thread``: the answer, or a suspension for approvals, or a failure.

        An interrupted run on the thread is finished first; a run waiting for approvals
        raises RunSuspendedError (approve or reject first). Without ``thread`` the run is
        its own thread (named by its run id, ``result.thread``), as seed 004's runs with
        no chat behind them: nothing is shared with any other run.

        ``owner``: the thread must be empty or owned by this user (the user of its first
        run), checked against the head the run's goal is committed on; otherwise
        ``Conflict`` (code ``thread_owned``) and nothing is written. The HTTP server
        passes it for a token bound to a user.
        """
        ctx = _context(context)
        if thread is None:
            thread = self.default_thread
        return await self._with(
            lambda ex: ex.step(
                input, thread=thread, user=user, context=ctx, metadata=metadata, owner=owner
            )
        )

    async def invoke(
        self,
        message: Any,
        session_id: str | None = None,
        *,
        user: str | None = None,
        context: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Any:
        """Protolink's ``Agent.invoke``: one turn, and its answer.

        ``session_id``: the thread. Without it, the agent's ``default_thread`` if set,
        else Protolink's shared default ``"invocation_session_id"``, so calls that name
        no session share one history, as Protolink's ``invoke()`` calls do (``step``
        keeps tether's rule: no thread, a thread of its own). A run that waits for
        approvals raises ``RunSuspendedError`` (approve or reject it, as after
        ``step``); a failed run raises ``AgentError`` (code ``run_failed``, the run's
        own code in ``details["error"]``), as Protolink's raises for a failed task.
        """
        if session_id is None:
            session_id = self.default_thread or INVOKE_SESSION
        result = await self.step(
            message, thread=session_id, user=user, context=context, metadata=metadata
        )
        if result.status == "completed":
            return result.answer
        if result.status == "suspended":
            pending = [p.to_dict() for p in result.pending_approvals]
            raise RunSuspendedError(
                f"run {result.run_id} on thread {result.thread!r} waits for approval of "
                f"{', '.join(p['name'] + ' (' + p['call_id'] + ')' for p in pending)}; "
                "approve or reject it",
                thread=result.thread,
                run=result.run_id,
                pending=pending,
            )
        error = result.error.to_dict() if result.error is not None else None
        raise AgentError(
            f"run {result.run_id} on thread {result.thread!r} failed"
            + (f": [{error['code']}] {error['message']}" if error else ""),
            code="run_failed",
            thread=result.thread,
            run=result.run_id,
            error=error,
        )

    async def resume(
        self,
        thread: str | None = None,
        *,
        run: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> StepResult:
        """Finish a run from the graph (after a crash or a shutdown): the thread's latest
        run, or the run ``run`` (seed 000's execution id) wherever it is.

        Completed steps are skipped; a tool call that was running is re-issued with
        the same idempotency key. A finished or suspended run is reported as it is.
        ``run`` alone finds the run's thread: a run started without a thread is its own
        thread, any other is looked up in the run index.
        """
        if thread is None and run is None:
            raise InvalidRequest("resume needs thread= or run= (a run id)", field="thread")
        ctx = _context(context)
        if thread is None:
            assert run is not None
            thread = await self._thread_of(run)
        where = thread
        try:
            return await self._with(lambda ex: ex.resume(thread=where, run=run, context=ctx))
        except NotFound:
            from ..control.prune import pruned_run  # a run a prune cut says so (RunPruned)

            store = await self._get_store()
            gone = None if run is None else await pruned_run(store, self.namespace, where, run)
            if gone is not None:
                raise gone from None
            raise

    async def _thread_of(self, run: str) -> str:
        """The thread of run ``run``: its own (a run started without one), else the index's."""
        store = await self._get_store()
        with contextlib.suppress(NotFound):
            await control_task(store, self.namespace, run, run)
            return run
        for entry in await list_index(store, self.namespace):
            if entry.run == run:
                return entry.thread
        raise NotFound(f"no run {run!r} in namespace {self.namespace!r}", run=run)

    @overload
    async def approve(
        self,
        thread: str,
        call: str,
        *,
        reason: str | None = ...,
        context: Mapping[str, Any] | None = ...,
        resume: Literal[True] = ...,
    ) -> StepResult: ...
    @overload
    async def approve(
        self,
        thread: str,
        call: str,
        *,
        reason: str | None = ...,
        context: Mapping[str, Any] | None = ...,
        resume: bool,
    ) -> StepResult | None: ...
    async def approve(
        self,
        thread: str,
        call: str,
        *,
        reason: str | None = None,
        context: Mapping[str, Any] | None = None,
        resume: bool = True,
    ) -> StepResult | None:
        """Approve a pending tool call (its ``call_id`` or tool_call node id) and continue.

        With ``resume=False`` only the decision is committed (returns None); any
        process continues the run later with ``resume``.
        """
        return await self._decide(thread, call, True, reason, context, resume)

    @overload
    async def reject(
        self,
        thread: str,
        call: str,
        *,
        reason: str | None = ...,
        context: Mapping[str, Any] | None = ...,
        resume: Literal[True] = ...,
    ) -> StepResult: ...
    @overload
    async def reject(
        self,
        thread: str,
        call: str,
        *,
        reason: str | None = ...,
        context: Mapping[str, Any] | None = ...,
        resume: bool,
    ) -> StepResult | None: ...
    async def reject(
        self,
        thread: str,
        call: str,
        *,
        reason: str | None = None,
        context: Mapping[str, Any] | None = None,
        resume: bool = True,
    ) -> StepResult | None:
        """Reject a pending tool call: the model gets an error result saying so (with ``reason``)."""
        return await self._decide(thread, call, False, reason, context, resume)

    async def _decide(
        self,
        thread: str,
        call: str,
        approve: bool,
        reason: str | None,
        context: Mapping[str, Any] | None,
        resume: bool,
    ) -> StepResult | None:
        if not isinstance(call, str) or not call:
            raise InvalidRequest(f"name the call by its call_id or node id, got {call!r}")
        if reason is not None and not isinstance(reason, str):
            raise InvalidRequest(f"reason is a string, got {reason!r}")
        ctx = _context(context)
        return await self._with(
            lambda ex: ex.decide(
                thread=thread,
                ref=call,
                approve=approve,
                reason=reason,
                context=ctx,
                resume=resume,
            )
        )

    async def pending_approvals(self, thread: str = "default") -> list[PendingApproval]:
        """The tool calls of the thread's latest run that wait for a decision."""

        async def go(ex: Executor) -> list[PendingApproval]:
            view = await ex.status(thread=thread)
            return [] if view is None else [c.approval() for c in view.pending()]

        return await self._with(go)

    # -- task and tool state

    async def runs(
        self,
        *,
        status: str | Sequence[str] | None = None,
        thread: str | None = None,
        user: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> RunList:
        """Runs of this agent's namespace from the run index (``tether.control.runs``):
        e.g. ``await agent.runs(status="suspended")`` for every run waiting for a human."""
        return await control_runs(
            await self._get_store(),
            namespace=self.namespace,
            status=status,
            thread=thread,
            user=user,
            after=after,
            limit=limit,
        )

    async def task(self, thread: str, run: str | None = None) -> TaskState:
        """One run's metadata and status history (the thread's latest run by default):
        ``tether.control.task`` on this agent's namespace."""
        return await control_task(await self._get_store(), self.namespace, thread, run)

    async def tool_state(
        self, tool: str, *, thread: str | None = None, user: str | None = None
    ) -> ToolState:
        """A handle on ``tool``'s state in its scope (the thread's, the user's or the app's),
        to read it, or to change it and ``await handle.commit()``."""
        t = self.tools.get(tool)
        if t is None or not t.stateful:
            raise InvalidRequest(
                f"{tool!r} is not a tool of this agent that keeps state "
                f"(stateful: {', '.join(n for n, x in self.tools.items() if x.stateful) or 'none'})"
            )
        if t.state_scope == "app":
            scope = scopes.APP
        elif t.state_scope == "user":
            if user is None:
                raise InvalidRequest(f"tool {tool!r} keeps its state per user: give user=")
            scope = scopes.user(user)
        else:
            if thread is None:
                raise InvalidRequest(f"tool {tool!r} keeps its state per thread: give thread=")
            scope = scopes.thread(thread)
        return ToolState(await self._get_store(), self.namespace, scope=scope, tool=tool)

    # -- control plane (SPEC §6): the operations of tether.control on this agent's state

    async def state_operation(
        self, operation: str, thread: str | None = None, **fields: Any
    ) -> StateOperationResult:
        """Run a control-plane operation (``describe``, ``reset``, ``compact``, ``export``,
        ``import``, ``history``, ``fork``, ``verify``) in this agent's namespace.

        ``fields`` are ``tether.control.StateOperationRequest`` fields (``user``,
        ``variable``, ``run``, ``include_data``, ``strategy`` ...).
        """
        from ..control.modules import with_modules
        from ..control.types import StateOperationRequest

        request = StateOperationRequest.from_dict(
            {"namespace": self.namespace, "thread": thread, **fields}
        )
        options: dict[str, Any] = {"model": self.model} if operation == "compact" else {}
        return await with_modules(
            await self._get_store(), operation, request, self.state_modules, **options
        )

    async def describe_state(
        self, thread: str | None = None, **fields: Any
    ) -> StateOperationResult:
        """What the thread (or the namespace, without one) holds, store by store."""
        return await self.state_operation("describe", thread, **fields)

    async def reset_state(self, thread: str | None = None, **fields: Any) -> StateOperationResult:
        """Clear exactly what is named: the thread, or ``variable=``/``run=``/``stores=`` of it."""
        return await self.state_operation("reset", thread, **fields)

    async def compact_state(self, thread: str, **fields: Any) -> StateOperationResult:
        """Compact the thread's conversation (``strategy`` recent, tokens or summary)."""
        return await self.state_operation("compact", thread, **fields)

    # -- synchronous conveniences for scripts

    def step_sync(self, input: Any, **kw: Any) -> StepResult:
        """``step`` for scripts without an event loop (opens and closes a URL store per call)."""
        return self._run_sync(lambda: self.step(input, **kw))

    def invoke_sync(self, message: Any, session_id: str | None = None, **kw: Any) -> Any:
        """``invoke`` for scripts without an event loop (Protolink's ``sync.invoke()``)."""
        return self._run_sync(lambda: self.invoke(message, session_id, **kw))

    def resume_sync(self, thread: str | None = None, **kw: Any) -> StepResult:
        return self._run_sync(lambda: self.resume(thread, **kw))

    def approve_sync(self, thread: str, call: str, **kw: Any) -> StepResult | None:
        return self._run_sync(lambda: self._decide_kw(thread, call, True, kw))

    def reject_sync(self, thread: str, call: str, **kw: Any) -> StepResult | None:
        return self._run_sync(lambda: self._decide_kw(thread, call, False, kw))

    async def _decide_kw(
        self, thread: str, call: str, approve: bool, kw: dict[str, Any]
    ) -> StepResult | None:
        return await self._decide(
            thread,
            call,
            approve,
            kw.get("reason"),
            kw.get("context"),
            bool(kw.get("resume", True)),
        )

    def _run_sync(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise AgentError(
                "the *_sync methods are for code without an event loop; use await agent.step(...)"
            )

        async def main() -> T:
            # A store opened from a URL may belong to this loop only (connections): open
            # and close it here. The in-memory store is kept, or it would forget everything.
            owned = (
                self._store_url is not None
                and self._store is None
                and not self._store_url.startswith("memory:")
            )
            try:
                return await fn()
            finally:
                if owned:
                    await self.close()

        return asyncio.run(main())


def _model(m: Any, what: str) -> Model:
    if isinstance(m, Mapping) or (isinstance(m, list) and m and isinstance(m[0], Mapping)):
        return model_from_config(m)
    if not isinstance(m, Model):
        raise InvalidRequest(
            f"{what} must have an async complete(request) method (the Model protocol), got {m!r}"
        )
    return m


def _context(context: Mapping[str, Any] | None) -> dict[str, Any]:
    if context is None:
        return {}
    if not isinstance(context, Mapping):
        raise InvalidRequest(f"context is a mapping, got {context!r}")
    return dict(context)
