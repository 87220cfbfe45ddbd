"""Loading the conversation view of one LLM node of a thread (SPEC §3).

The view is ``[system prompt] + [summary] + messages``:

* the system prompt is the newest ``system:<llm>`` resource (an indexed read);
* the summary is the newest ``semantic:summary:<llm>`` node (indexed); when it holds
  a summary, only nodes after its ``through`` are read, so the cost of a view does
  not grow with the history the summary stands for;
* messages come from ``projection.project`` and the policy picks whole units.

Every message is read-only (``tether.core.messages.ReadOnlyDict``, its tool calls and
their arguments too): the views of a thread share them.

``window`` and ``tokens`` read the thread from its tail in growing pages and stop
as soon as the policy's choice cannot change; ``buffer`` and ``summary`` project
everything after the summary, kept by the process between views and brought
forward by the nodes committed since (``view_cache``), so a warm view of a long
thread reads what is new, not the thread. ``summary`` compacts (writes a summary node through
``compaction.compact``) once more than ``threshold`` messages follow the latest
summary, so the model is asked once per threshold, not on every load.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import scopes
from ..core.errors import InvalidRequest
from ..core.graph import CausalNode
from ..core.messages import Message, MessageList, Model, ReadOnlyDict, freeze
from ..store.base import Head, Store
from .policies import (
    Buffer,
    Policy,
    Summary,
    Tokens,
    Window,
    policy_from_dict,
    select_tokens,
    select_window,
)
from .projection import (
    Projector,
    SummaryContent,
    Unit,
    flatten,
    project,
    summary_key,
    summary_message,
    system_key,
)
from .reads import feed_projector, read_tail
from .tokens import default_counter, messages_tokens
from .view_cache import view_cache

__all__ = ["ConversationView", "check_llm", "conversation_view", "load_conversation"]

_BUFFER = Buffer()


def check_llm(llm: object) -> str:
    if not isinstance(llm, str) or not llm or len(llm) > 200 or "\n" in llm:
        raise InvalidRequest(
            f"llm must be an LLM node name (1-200 characters), got {llm!r}", field="llm"
        )
    return llm


@dataclass(frozen=True, kw_only=True, slots=True)
class ConversationView:
    """A loaded view: the messages plus where they came from."""

    messages: list[Message]
    kept: int  # messages after the system prompt and summary
    summary: SummaryContent | None = None
    summary_node: str | None = None
    sequence: int = 0  # the thread's last sequence when the view was read
    units: tuple[Unit, ...] = field(default=(), repr=False)
    # The thread's head the view was read at (after any summary this read committed):
    # a caller may start a transaction from it (Transaction.seed), its commit checks it.
    head: Head | None = field(default=None, repr=False, compare=False)


async def _load(
    store: Store,
    namespace: str,
    scope: str,
    llm: str,
    policy: Policy,
    run: str | None,
    at: Head | None = None,
    with_units: bool = True,
    lead: tuple[Message, ...] | None = None,
) -> ConversationView:
    summary_node = await store.resource_head(namespace, scope, summary_key(llm))
    system_node = await store.resource_head(namespace, scope, system_key(llm))
    head = at
    if head is None or any(
        n is not None and n.sequence > head.sequence for n in (summary_node, system_node)
    ):
        # No head given, or a summary or system prompt newer than it (written since):
        # the messages are read up to the head now, which holds them.
        head = await store.head(namespace, scope)
    summary = (
        SummaryContent.parse(summary_node.payload.get("content"))
        if summary_node is not None and isinstance(summary_node.payload, dict)
        else None
    )
    prefix: list[Message] = []
    if system_node is not None and isinstance(system_node.payload, dict):
        content = system_node.payload.get("content")
        if isinstance(content, str):
            prefix.append(ReadOnlyDict(role="system", content=content))
    if summary is not None and summary.text:
        prefix.append(summary_message(summary.text))
    after = summary.through if summary is not None else 0
    before = head.sequence + 1

    if isinstance(policy, Window | Tokens):
        # Window and tokens read the tail in growing pages until the policy's choice
        # stops at a unit inside what was read (older nodes cannot change it then).
        if isinstance(policy, Window):
            size = policy.size

            def choose(units: list[Unit]) -> int:
                return select_window(units, size)

            first_page = max(64, 4 * size)
        else:
            counter = policy.counter or default_counter()
            budget = policy.max_tokens - messages_tokens(prefix, counter)
            keep = policy.preserve_recent

            def choose(units: list[Unit]) -> int:
                return select_tokens(units, budget, keep, counter)

            first_page = 64
        last: list[tuple[int, list[Unit], int]] = []  # (nodes projected, units, start)

        def enough(nodes: list[Any]) -> bool:
            units = project(nodes, llm=llm, run=run)
            last[:] = [(len(nodes), units, choose(units))]
            return last[0][2] > 0

        nodes = await read_tail(
            store,
            namespace,
            scope,
            after=after,
            before=before,
            enough=enough,
            first_page=first_page,
        )
        if last and last[0][0] == len(nodes):
            _, units, start = last[0]
        else:
            units = project(nodes, llm=llm, run=run)
            start = choose(units)
        units = units[start:]
    else:
        cache = view_cache(store)
        if cache is not None:
            # Kept by this process and brought forward by the nodes since (view_cache).
            first = None if lead is None else (*lead, *prefix)
            kept_units, messages = await cache.view(
                store,
                namespace,
                scope,
                llm=llm,
                run=run,
                after=after,
                head=head,
                units=with_units,
                lead=first,
            )
            if first is not None:
                # lead + prefix + the conversation, as one list the cache may share
                kept = len(messages) - len(first)
                return _view([], kept_units, messages, summary, summary_node, head, kept=kept)
            return _view(prefix, kept_units, messages, summary, summary_node, head)
        projector = Projector(llm, run=run)
        await feed_projector(store, namespace, scope, projector, after=after, before=before)
        units = projector.units()
    flat = flatten(units)
    if lead is not None:
        shared = MessageList((*lead, *prefix))
        list.extend(shared, flat)
        return _view([], tuple(units), shared, summary, summary_node, head, kept=len(flat))
    return _view(prefix, tuple(units), flat, summary, summary_node, head)


def _view(
    prefix: list[Message],
    units: tuple[Unit, ...],
    messages: list[Message],
    summary: SummaryContent | None,
    summary_node: CausalNode | None,
    head: Head,
    *,
    kept: int | None = None,
) -> ConversationView:
    """``prefix + messages`` (a new list: ``messages`` may be a kept view's own), or,
    with ``kept`` (the conversation's share of ``messages``), ``messages`` itself: a
    ``MessageList`` that already holds the lead and prefix."""
    return ConversationView(
        messages=messages if kept is not None else prefix + messages,
        kept=len(messages) if kept is None else kept,
        summary=summary,
        summary_node=summary_node.id if summary_node is not None and summary else None,
        sequence=head.sequence,
        units=units,
        head=head,
    )


async def conversation_view(
    store: Store,
    namespace: str,
    thread_id: str,
    *,
    llm: str = "agent",
    policy: Policy | Mapping[str, Any] | str = _BUFFER,
    run: str | None = None,
    model: Model | None = None,
    at: Head | None = None,
    units: bool = True,
    lead: Sequence[Message] | None = None,
) -> ConversationView:
    """Like ``load_conversation`` but returns the ``ConversationView`` (counts, summary).

    ``lead``: messages to put first (a system prompt rendered for this call); the view's
    ``messages`` are then a read-only ``MessageList`` (lead, stored system prompt,
    summary, conversation) for a model request, which this process may hand to the
    next view of the thread with the same lead again, brought forward in place once
    nothing else holds it (a whole buffer of a long thread is then not copied a turn).

    ``units=False``: the view's ``units`` are left empty (a caller that sends the
    messages only: a whole buffer's units are as many as its turns).

    ``at``: a head of the thread the caller holds (one it read, or one its own commit
    left), to read the messages up to it instead of reading the head; the view's
    ``head`` is then ``at``, unless the summary or system prompt has a version newer
    than ``at`` (then the head is read). A summary this call commits is read back at
    the new head.
    """
    scope = scopes.thread(thread_id)
    check_llm(llm)
    if run is not None and (not isinstance(run, str) or not run):
        raise InvalidRequest(f"run must be a run id string or None, got {run!r}", field="run")
    pol = (
        policy
        if isinstance(policy, Buffer | Window | Summary | Tokens)
        else policy_from_dict(policy)
    )
    first = None if lead is None else tuple(freeze(m) for m in lead)
    view = await _load(store, namespace, scope, llm, pol, run, at, units, first)
    if isinstance(pol, Summary) and view.kept > pol.threshold:
        from .compaction import compact  # compaction builds on this module's reads

        result = await compact(
            store,
            namespace,
            thread_id,
            llm=llm,
            strategy="summary",
            max_messages=pol.threshold,
            preserve_recent=pol.keep,
            summary_max_tokens=pol.max_tokens,
            model=pol.model or model,
        )
        if result.compacted:
            view = await _load(store, namespace, scope, llm, pol, run, None, units, first)
    return view


async def load_conversation(
    store: Store,
    namespace: str,
    thread_id: str,
    *,
    llm: str = "agent",
    policy: Policy | Mapping[str, Any] | str = _BUFFER,
    run: str | None = None,
    model: Model | None = None,
) -> list[Message]:
    """The messages ``llm`` sees next in thread ``thread_id``, under ``policy``.

    ``run`` is the run in progress: its nodes are included though it has no answer
    yet. Other runs without an answer keep only their receipts (completed tool calls
    with their results); see ``projection``. ``model`` writes summaries for the
    ``summary`` policy when the policy names none (else an extractive summary).

    With the ``summary`` policy this may write a summary node (its own commit): call
    it before opening the transaction of the step that will use the messages.

    The list is the caller's; the messages in it are read-only (``ReadOnlyDict``, their
    tool calls and arguments too), shared with every later view this process makes of
    the thread: ``dict(m)`` or ``copy.deepcopy(messages)`` to edit them.
    """
    view = await conversation_view(
        store, namespace, thread_id, llm=llm, policy=policy, run=run, model=model
    )
    return view.messages
