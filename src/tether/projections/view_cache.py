"""Conversation views kept by a running process and brought forward by new nodes.

A whole-buffer view of a long thread used to read and project every node of the
thread on every turn, though a turn adds a handful. A ``ViewCache`` (one per store
object, ``view_cache``) keeps, per (namespace, thread, LLM node), a ``Projector`` fed
with the thread's nodes after the latest summary up to the head it was read at; the
next view reads only the nodes committed since, by this process or any other, and
feeds them. A view served so is the view rebuilt from the graph (property tests in
tests/test_view_cache.py), because the entry is dropped and the view read again
whenever its nodes cannot simply be followed:

* the scope's generation differs (a reset, a prune, an import over it, a deleted
  namespace: each bumps it);
* the summary the view starts after is another one (a compaction, or one undone);
* the scope's sequence is behind the entry's (the caller holds an older head), or
  the node the entry ended on is not at its sequence any more, or the nodes read
  since are not contiguous: read again, never guessed.

Asked with ``lead`` (the messages to put first: a system prompt, a summary), a view's
messages come back as one read-only ``MessageList``, ``lead`` then the conversation,
for a model request. The entry keeps that list and hands it out again next time,
brought forward in place by the messages that changed, when nothing else holds it any
more and ``lead`` is the same (CPython's reference count says so exactly; on other
interpreters, and when the list is held, a new list is made), so a long thread's
request costs what changed, not a copy of the thread.

A store whose reads can change without its heads moving keeps no views
(``Store.reads_follow_heads`` is False: an encrypted store, where erasing a user's
key turns payloads into placeholders in place). The cache is bounded in entries and
in the goals and inferences its projectors hold (least recently used first out); a
thread larger than the whole bound is read in full each time, as without a cache.
"""

from __future__ import annotations

import sys
import sysconfig
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from ..core.graph import CausalNode
from ..core.messages import Message, MessageList
from ..store.base import Head, Store
from .projection import Projector, Unit
from .reads import feed_projector, read_nodes

__all__ = ["MAX_ENTRIES", "MAX_NODES", "ViewCache", "view_cache"]

MAX_ENTRIES: Final = 256  # (namespace, thread, llm) views kept per store object
MAX_NODES: Final = 200_000  # goals and inferences held by all of them together


@dataclass(slots=True, kw_only=True)
class _Entry:
    head: Head  # the head the projector is fed up to
    last_id: str | None  # the id of the node at head.sequence, when the projector read it
    after: int  # the view starts after this sequence (the summary's ``through``)
    projector: Projector
    shared: MessageList | None = None  # lead + the projector's messages, last handed out
    lead: tuple[Message, ...] = ()


# A list only an entry holds can be brought forward in place: no request, caller or
# other task sees it change. CPython's reference count tells exactly (a build with the
# GIL, before 3.14, whose borrowed stack references it would not count); elsewhere a
# new list is made each time.
_COUNTS_REFERENCES: Final = (
    sys.implementation.name == "cpython"
    and sys.version_info < (3, 14)
    and not sysconfig.get_config_var("Py_GIL_DISABLED")
)


def _shared(
    e: _Entry, lead: tuple[Message, ...], messages: list[Message]
) -> tuple[MessageList, bool]:
    """``lead`` + ``messages`` (the projector's, just viewed) as one read-only list: the
    entry's own brought forward when nothing else holds it (True), else a new one."""
    changed = e.projector.changes()
    s = e.shared
    # References to s here: e.shared, the name s, and getrefcount's argument.
    if s is not None and _COUNTS_REFERENCES and sys.getrefcount(s) <= 3 and e.lead == lead:
        start = len(lead) + changed
        list.__delitem__(s, slice(start, None))
        list.extend(s, messages[changed:])
        return s, True
    s = MessageList(lead)
    list.extend(s, messages)
    e.shared, e.lead = s, lead
    return s, False


_Key = tuple[str, str, str]


class ViewCache:
    """Projected conversations of threads, per (namespace, scope, llm), bounded."""

    def __init__(self, *, max_entries: int = MAX_ENTRIES, max_nodes: int = MAX_NODES) -> None:
        self.max_entries = max_entries
        self.max_nodes = max_nodes
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        # What the views served did, for tests and benchmarks: brought forward, read whole.
        self.forwarded = 0
        self.rebuilt = 0
        self.reused = 0  # request lists (``lead``) brought forward in place

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    async def view(
        self,
        store: Store,
        namespace: str,
        scope: str,
        *,
        llm: str,
        run: str | None,
        after: int,
        head: Head,
        units: bool = True,
        lead: tuple[Message, ...] | None = None,
    ) -> tuple[tuple[Unit, ...], list[Message]]:
        """The units of ``llm``'s conversation in ``scope`` from the nodes in
        (after, head.sequence], with their messages: ``project`` of those nodes.

        The list of messages is the cache's (``Projector.view``): copy it to keep it.
        ``units=False``: the units are left out (``()``). With ``lead``: the messages
        are a ``MessageList`` of ``lead`` then the conversation, which a later view
        with the same ``lead`` may bring forward in place once nothing else holds it."""
        key = (namespace, scope, llm)
        e = self._entries.get(key)
        if (
            e is not None
            and e.head.generation == head.generation
            and e.after == after
            and e.head.sequence <= head.sequence
        ):
            known = e.head
            nodes = await _since(store, namespace, scope, e, head)
            # Another task of this process may have moved the entry meanwhile: then the
            # nodes read do not follow it; read whole below.
            if nodes is not None and self._entries.get(key) is e and e.head is known:
                e.projector.feed(nodes)
                e.projector.set_run(run)
                if nodes:
                    e.last_id = nodes[-1].id
                e.head = head
                self._entries.move_to_end(key)
                self.forwarded += 1
                kept_units, messages = e.projector.view(units=units)
                self._bound()
                if lead is not None:
                    shared, reused = _shared(e, lead, messages)
                    self.reused += reused
                    return kept_units, shared
                return kept_units, messages
        self.rebuilt += 1
        # The whole read takes (sequence, kind, payload) only: all a projection reads, and
        # no id, parents or timestamp built per node (a long thread's cold view).
        p = Projector(llm, run=run)
        ended = await feed_projector(
            store, namespace, scope, p, after=after, before=head.sequence + 1
        )
        kept_units, messages = p.view(units=units)
        current = self._entries.get(key)
        # Kept only when the nodes read end at the head's own sequence: a head ahead of
        # what the scope holds (another scope's head, given by mistake) would have the
        # next view read after a sequence the projector never saw, and skip nodes.
        keep = ended == head.sequence and (
            current is None
            or current.head.generation != head.generation
            or current.head.sequence <= head.sequence
        )
        last: str | None = None
        if keep and ended > after:
            # The id of the last node read, which the next view checks is still there.
            end = await store.nodes(namespace, scope, after=ended - 1, before=ended + 1, limit=1)
            keep = len(end) == 1 and end[0].sequence == ended
            last = end[0].id if keep else None
        if keep:
            entry = self._entries[key] = _Entry(head=head, last_id=last, after=after, projector=p)
            self._entries.move_to_end(key)
            self._bound()
            if lead is not None:
                return kept_units, _shared(entry, lead, messages)[0]
        if lead is not None:
            shared = MessageList(lead)
            list.extend(shared, messages)
            return kept_units, shared
        return kept_units, messages

    def _bound(self) -> None:
        entries = self._entries
        while len(entries) > self.max_entries:
            entries.popitem(last=False)
        total = sum(e.projector.size for e in entries.values())
        while entries and total > self.max_nodes:
            _, e = entries.popitem(last=False)
            total -= e.projector.size


async def _since(
    store: Store, namespace: str, scope: str, e: _Entry, head: Head
) -> list[CausalNode] | None:
    """The nodes after ``e``'s head up to ``head``, or None when they do not follow it."""
    seq = e.head.sequence
    if seq == head.sequence:
        return []
    check = e.last_id is not None
    nodes = await read_nodes(
        store, namespace, scope, after=seq - 1 if check else seq, before=head.sequence + 1
    )
    if check:
        if not nodes or nodes[0].id != e.last_id or nodes[0].sequence != seq:
            return None
        nodes = nodes[1:]
    if len(nodes) != head.sequence - seq or (nodes and nodes[0].sequence != seq + 1):
        return None  # not contiguous: something between was removed or not read
    return nodes


_caches: weakref.WeakKeyDictionary[Store, ViewCache] = weakref.WeakKeyDictionary()


def view_cache(store: Store) -> ViewCache | None:
    """The view cache of ``store`` (made on first use), or None: this store's reads can
    change without its heads moving (``Store.reads_follow_heads``), so nothing is kept."""
    if not store.reads_follow_heads:
        return None
    cache = _caches.get(store)
    if cache is None:
        cache = _caches[store] = ViewCache()
    return cache
