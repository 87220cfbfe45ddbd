"""``get_delta_channel_history`` for ``TetherSaver``: the writes of a parent chain in a few reads.

LangGraph's ``DeltaChannel`` keeps a channel out of most checkpoints and rebuilds it
from the writes of the target's ancestors, back to the nearest ancestor that holds
the channel (a ``_DeltaSnapshot``, or a plain value from before the channel became a
``DeltaChannel``). LangGraph's default walks the chain with one ``get_tuple`` per
ancestor, each decoding every channel and every write of that checkpoint. Here:

* the thread's nodes are read newest first, a page at a time (``store.nodes``,
  descending), and the walk follows ``parent`` links through what the pages hold:
  a checkpoint's writes are stored after its put, so once the walk reaches an
  ancestor's checkpoint node, the pages read so far hold all of its writes. A
  chain of ``k`` steps costs about ``k x (nodes per step) / page`` reads, whatever
  the length of the thread before the seed;
* checkpoint ids whose writes may lie below their newest put (the id was put
  again, or written to before its put; the saver records those under
  ``lgc:<ns>;odd``) have their writes read by key instead, so the result is
  exact in every case;
* only the writes of the requested channels and the seeds are decoded, in one
  batched resolve that reuses the nodes the pages already hold.

The result is what LangGraph's default computes over this saver's ``get_tuple``
(``tests/test_adapter_langgraph_delta.py`` checks both against each other).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite, get_checkpoint_id

from ..core.graph import CausalNode
from ..store import Store
from ..store.base import JsonCodec
from ._lg_keys import (
    configurable,
    cp_key,
    del_key,
    effective_writes,
    enc_ns,
    id_key,
    odd_key,
    thread_scope,
    w_key,
    w_prefix,
    write_records,
)
from ._values import LRU

_ALL: Final = 1_000_000


_RECENT_KEEP: Final = 1024  # newest nodes of a thread kept between calls (``_Pages``)


class Saver(Protocol):
    """What the walk reads through: ``TetherSaver`` has it. This module owns the
    shape, so it never imports the saver (``langgraph.py`` imports this module)."""

    store: Store
    namespace: str
    _recent: LRU[tuple[str, str], tuple[int, list[CausalNode]]]

    async def _pointer(self, scope: str, e: str, cid: str) -> CausalNode | None: ...

    async def _latest(self, scope: str, ns: str) -> CausalNode | None: ...

    async def _deleted(self, scope: str, e: str) -> set[str]: ...

    async def _resolve(
        self,
        scope: str,
        refs: Sequence[dict[str, Any]],
        known: dict[str, CausalNode] | None = None,
    ) -> list[Any]: ...


class _Pages:
    """The thread's nodes, newest first, read a page at a time on demand.

    ``recent``: the newest nodes of the thread as an earlier call read them, with the
    generation they belong to (``TetherSaver._recent``; only on a store with the
    default codec, see ``delta_history``). Nodes never change once stored, and only a reset (which bumps the generation) removes them, so while the
    generation is the same the first read only fetches the nodes stored since; a
    ``DeltaChannel`` walk back to its snapshot (LangGraph's default: 100 updates)
    then decodes a step's new nodes instead of the whole page again.
    """

    page = 512  # nodes per read (tests set it small to end walks at page edges)

    def __init__(
        self,
        saver: Saver,
        scope: str,
        e: str,
        recent: tuple[int, list[CausalNode]] | None = None,
    ) -> None:
        self.saver, self.scope = saver, scope
        self.cp_key, self.w_prefix, self.i_prefix = cp_key(e), w_prefix(e), id_key(e, "")
        self.nodes: dict[str, CausalNode] = {}
        self.checkpoints: dict[str, CausalNode] = {}  # checkpoint id -> its newest put
        # checkpoint id -> its single writes (``write_records``), newest first
        self.writes: dict[str, list[dict[str, Any]]] = {}
        self.before: int | None = None
        self.done = False
        self.recent = recent
        self.read: list[CausalNode] = []  # every node taken in, newest first, contiguous
        self.generation: int | None = None  # the generation ``read`` belongs to, if known

    async def more(self) -> None:
        store, ns = self.saver.store, self.saver.namespace
        if self.before is None and self.generation is None:
            recent, self.recent = self.recent, None
            if recent is not None and await self._since(recent):
                return
            self.generation = (await store.head(ns, self.scope)).generation
        page = await store.nodes(
            ns, self.scope, before=self.before, limit=self.page, descending=True
        )
        self._take(page)
        # not ``len(page) < self.page``: a pruned scope's pages may come back short
        self.done = not page or page[-1].sequence <= 1

    async def _since(self, recent: tuple[int, list[CausalNode]]) -> bool:
        """Take in the nodes stored since ``recent`` was read, then ``recent`` itself;
        False (nothing taken) if the thread was reset since, or grew by a page or more."""
        store, ns = self.saver.store, self.saver.namespace
        generation, nodes = recent
        newer = await store.nodes(ns, self.scope, after=nodes[0].sequence, limit=self.page)
        # after the read: the same generation now means no reset since ``recent``
        # (generations only grow), so the nodes read belong to it too
        if len(newer) >= self.page or (await store.head(ns, self.scope)).generation != generation:
            return False
        self.generation = generation
        self._take([*reversed(newer), *nodes])
        self.done = nodes[-1].sequence <= 1
        return True

    def _take(self, page: Sequence[CausalNode]) -> None:
        cp, wp, n_wp, ip = self.cp_key, self.w_prefix, len(self.w_prefix), self.i_prefix
        for n in page:
            self.nodes[n.id] = n
            rk = n.resource_key
            if rk is None:
                continue
            if rk == cp or rk.startswith(ip):
                # a checkpoint (under either layout's key), a pointer, or the marker
                if n.payload.get("lg") == "cp":
                    self.checkpoints.setdefault(n.payload["id"], n)
            elif rk.startswith(wp):
                # newest first: a node's own writes go in reverse, as if one node each
                self.writes.setdefault(rk[n_wp:], []).extend(write_records([n.payload])[::-1])
        if page:
            self.before = page[-1].sequence
            if len(self.read) < _RECENT_KEEP:
                self.read.extend(page[: _RECENT_KEEP - len(self.read)])

    async def checkpoint(self, cid: str) -> CausalNode | None:
        while cid not in self.checkpoints and not self.done:
            await self.more()
        return self.checkpoints.get(cid)

    async def kept(self) -> tuple[int, list[CausalNode]] | None:
        """What a later call may start from: the newest nodes read, if the thread was
        not reset while they were read (the generation before and after is the same)."""
        if not self.read or self.generation is None:
            return None
        head = await self.saver.store.head(self.saver.namespace, self.scope)
        if head.generation != self.generation:
            return None
        return self.generation, self.read


async def delta_history(
    saver: Saver, config: RunnableConfig, channels: Sequence[str]
) -> Mapping[str, DeltaChannelHistory]:
    if not channels:
        return {}
    conf = configurable(config)
    thread_id = conf["thread_id"]
    scope = thread_scope(thread_id)
    ns = conf.get("checkpoint_ns", "") or ""
    e = enc_ns(ns)
    store, namespace = saver.store, saver.namespace
    cid = get_checkpoint_id(config)
    target = await saver._pointer(scope, e, cid) if cid else await saver._latest(scope, ns)
    wanted = list(dict.fromkeys(channels))
    collected: dict[str, list[tuple[str, dict[str, Any]]]] = {c: [] for c in wanted}
    seeds: dict[str, dict[str, Any]] = {}
    parent = target.payload.get("parent") if target is not None else None
    if parent:
        heads = await store.resource_heads(namespace, scope, prefix=f"lgc:{e};")
        dead = await saver._deleted(scope, e) if del_key(e) in heads else set()
        odd: set[str] = set()
        if odd_key(e) in heads:
            marks = await store.versions(namespace, scope, odd_key(e), limit=_ALL)
            odd = {m.payload["id"] for m in marks}
        # Kept nodes only where a stored payload reads back the same forever: the
        # default codec. Under a cipher, erasing a user makes payloads unreadable in
        # place, and a kept node would still show what was erased.
        keep = type(store.codec) is JsonCodec
        pages = _Pages(saver, scope, e, saver._recent.get((scope, e)) if keep else None)
        remaining = set(wanted)
        visited: set[str] = set()
        chain: list[tuple[CausalNode, list[dict[str, Any]]]] = []  # newest first
        cur: str | None = parent
        while cur and remaining and cur not in visited:
            node = await pages.checkpoint(cur)
            if node is None or node.id in dead:
                break  # get_tuple finds nothing there: LangGraph's walk stops too
            visited.add(cur)
            if cur in odd:
                stored = [
                    w.payload
                    for w in await store.versions(namespace, scope, w_key(e, cur), limit=_ALL)
                ]
            else:
                stored = pages.writes.get(cur, [])[::-1]
            writes = [w for w in effective_writes(stored) if w["channel"] in remaining]
            chain.append((node, writes))
            values = node.payload["values"]
            for ch in [c for c in remaining if c in values]:
                seeds[ch] = values[ch]
                remaining.discard(ch)
            cur = node.payload.get("parent")
        for _, writes in reversed(chain):
            for w in writes:
                collected[w["channel"]].append((w["task"], w["value"]))
        refs = [ref for c in wanted for _, ref in collected[c]] + [seeds[c] for c in seeds]
        values_out = iter(await saver._resolve(scope, refs, pages.nodes))
        kept = await pages.kept() if keep else None
        if kept is None:
            saver._recent.pop((scope, e))
        else:
            saver._recent.put((scope, e), kept)
    else:
        values_out = iter(())
    result: dict[str, DeltaChannelHistory] = {}
    for c in wanted:
        pending: list[PendingWrite] = [(task, c, next(values_out)) for task, _ in collected[c]]
        result[c] = {"writes": pending}
    for c in seeds:
        result[c]["seed"] = next(values_out)
    return {c: result[c] for c in channels}
