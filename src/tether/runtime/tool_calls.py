"""Tool-call execution for the executor: each call runs, then its result is committed.

Calls of one model response run concurrently; each result (with the tool's own state
writes) is one commit as soon as it is in, so parallel calls that finish survive a
crash of the others. A call's node id is the idempotency key the tool receives. The
credentials a call resolves reach only that tool and are scrubbed from whatever it
writes or logs. Agent-memory tools stage their edit and their result in one commit.

``ToolCalls`` is a mixin of ``Executor``, which provides the store, the tools and
``_commit`` (one step computed against a fresh head, see executor.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..core import scopes
from ..core.errors import TetherError
from ..store.base import Store
from ..store.txn import Transaction
from . import _observe
from .agent_memory_tools import MemoryTools
from .credentials import CredentialError, CredentialProvider, redact, resolve_credentials
from .plan import Call
from .run_context import RunContext
from .spec import Spec, ToolNode
from .tool_state import ToolState, state_lock
from .tools import Tool, ToolArgumentsError, jsonable

log = logging.getLogger("tether.runtime")


class ToolCalls:
    """Runs a model response's tool calls and commits their results (mixed into Executor)."""

    store: Store
    namespace: str
    spec: Spec
    tools: dict[str, Tool]
    memory_tools: dict[str, MemoryTools]
    credential_provider: CredentialProvider | None

    async def _commit(
        self,
        rc: RunContext,
        build: Callable[[Transaction], Awaitable[bool]],
        *,
        expect: int | None,
    ) -> bool:
        raise NotImplementedError  # Executor._commit

    async def _run_calls(self, rc: RunContext, calls: Sequence[Call]) -> None:
        """Execute calls concurrently; each result is committed as soon as it is in."""
        await asyncio.gather(
            *(
                _observe.tool_call(
                    self._run_call(rc, c),
                    tool=c.name,
                    call_id=c.call_id,
                    arguments=c.arguments,
                    secrets=rc.credentials.values(),
                )
                for c in calls
            )
        )

    async def _run_call(self, rc: RunContext, call: Call) -> None:
        if call.name in self.memory_tools and call.decision != "rejected":
            problem = await self._run_memory_call(rc, call)
            if problem is None:
                return
            await self._commit_result(rc, call, problem, True)
            return
        if call.decision == "rejected":
            await self._commit_result(rc, call, "A human rejected this call.", True)
            return
        tool = self.tools.get(call.name)
        if tool is None:
            content = f"Unknown tool {call.name!r}; available: {', '.join(self.tools) or 'none'}."
            await self._commit_result(rc, call, content, True)
            return
        state: ToolState | None = None
        if tool.stateful:
            where = self._state_scope(tool, rc)
            if where.startswith("!"):
                await self._commit_result(rc, call, where[1:], True)
                return
            state = ToolState(self.store, self.namespace, scope=where, tool=tool.name)
            # One call at a time per tool and state: parallel calls never lose an update.
            async with state_lock(self.store, self.namespace, where, tool.name):
                await self._invoke(rc, call, tool, state)
            return
        await self._invoke(rc, call, tool, None)

    def _state_scope(self, tool: Tool, rc: RunContext) -> str:
        """The scope holding ``tool``'s state for this run, or ``"!<why not>"``."""
        if tool.state_scope == "user":
            if rc.user is None:
                return (
                    f"!tool {tool.name!r} keeps its state per user, and this conversation has "
                    "no user; pass user= to agent.step"
                )
            return scopes.user(rc.user)
        if tool.state_scope == "app":
            return scopes.APP
        return rc.scope

    def _credential_names(self, tool: Tool, call: Call) -> tuple[str, ...]:
        names = list(tool.credentials)
        node_name = call.node.payload.get("node")
        if isinstance(node_name, str) and node_name in self.spec:
            node = self.spec.node(node_name)
            if isinstance(node, ToolNode):
                names += [n for n in node.credentials or () if n not in names]
        return tuple(names)

    async def _invoke(
        self, rc: RunContext, call: Call, tool: Tool, state: ToolState | None
    ) -> None:
        """Run one tool call and commit its result (with its state writes) in one commit."""
        secrets: list[str] = sorted(rc.secrets)
        try:
            creds = await resolve_credentials(
                self._credential_names(tool, call),
                provider=self.credential_provider,
                supplied=rc.credentials,
                context=rc.context,
            )
            rc.secrets.update(v for v in creds.values() if isinstance(v, str))
            secrets = sorted(rc.secrets)
            if state is not None:
                state.secrets = tuple(secrets)
            content = await tool.invoke(
                call.arguments,
                idempotency_key=call.node.id,
                context=rc.context,
                state=state,
                credentials=creds,
            )
            is_error = False
        except CredentialError as e:
            content, is_error = e.message, True
        except ToolArgumentsError as e:
            content, is_error = f"Invalid arguments for {call.name}: {e}", True
        except Exception as e:  # the model sees the failure and can react to it
            content, is_error = redact(f"{type(e).__name__}: {e}", secrets), True
            log.info("tool %s failed in run %s: %r", call.name, rc.run_id, content)
        if is_error and state is not None:
            state.discard()  # a failed call leaves its state as it was
        # A tool that echoes a credential back must not get it stored.
        content = redact(content, secrets)
        await self._commit_result(
            rc, call, content, is_error, state=state, scrub=lambda v: redact(v, secrets)
        )

    async def _commit_result(
        self,
        rc: RunContext,
        call: Call,
        content: Any,
        is_error: bool,
        *,
        state: ToolState | None = None,
        scrub: Callable[[Any], Any] | None = None,
    ) -> None:
        if is_error:
            _observe.tool_failed()
        payload = result_payload(call, content, is_error=is_error)
        parents = [call.node.id] + ([call.verification.id] if call.verification else [])

        async def build(txn: Transaction) -> bool:
            current = rc.view.calls.get(call.node.id)
            if current is None or current.result is not None:
                return False  # another process finished this call first: its result stands
            if state is not None and state.dirty:
                await state.stage(txn, redact=scrub)
            await txn.append(rc.scope, "tool_result", payload, parents=parents)
            return True

        await self._commit(rc, build, expect=None)

    async def _run_memory_call(self, rc: RunContext, call: Call) -> str | None:
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
                result_payload(call, jsonable(content), is_error=False),
                parents=[call.node.id, *([call.verification.id] if call.verification else [])],
            )
            return True

        await self._commit(rc, build, expect=None)
        return failure[-1] if failure else None


def result_payload(call: Call, content: Any, *, is_error: bool) -> dict[str, Any]:
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
