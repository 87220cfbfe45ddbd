"""A LangGraph checkpointer on any tether store: ``TetherSaver``.

    from tether.adapters.langgraph import TetherSaver

    saver = TetherSaver.from_url("sqlite:///state.db")     # sync code
    graph = builder.compile(checkpointer=saver)

    async with await TetherSaver.afrom_url("sqlite:///state.db") as saver:   # async code
        graph = builder.compile(checkpointer=saver)

Needs the ``langgraph`` extra (``pip install tether[langgraph]``); the core never
imports LangGraph.

How a LangGraph thread maps onto tether (docs/adapters.md has the whole story):

* LangGraph thread ``t`` is the tether scope ``thread:t`` of the saver's
  namespace; ``checkpoint_ns`` (subgraphs) lives inside it.
* Every checkpoint is one ``resource`` node under its own id key
  ``lgi:<ns>;<checkpoint id>``, found by id in one indexed read (a put of the same
  id again is the key's next version). The latest checkpoint is this saver's own
  last put when nothing was written to the thread since, else the newest put
  walking back from the thread's end. ``lgc:<ns>;cp`` holds a marker written by
  the namespace's first put. Threads written before kept every checkpoint under
  ``lgc:<ns>;cp`` (its head the latest) and a pointer node under each id key;
  they read as before and grow in this layout (``_pointer``, ``_latest``).
  Checkpoint ids, channel versions, metadata and parent links are LangGraph's,
  unchanged.
* Channel values are content-addressed (``_lg_values``): a list channel such as
  ``messages`` is stored as its elements under a Merkle tree, so a step stores
  its new messages plus a few tree nodes, never the whole history again.
  LangChain messages become conversation nodes (``goal`` for a human message,
  ``inference`` for an AI message, ``tool_result`` for a tool message) so
  tether's views and inspector read them; the exact serialized message rides
  along in the payload (``v``). A put serializes the whole list in one call, as
  LangGraph's savers do (so edits made in place are stored), and stores only
  the elements whose bytes are new; a read decodes the list in one call.
* Pending writes are nodes under ``lgw:<ns>;<checkpoint id>``: one node per
  ``put_writes`` call (``ws``, its writes in order); threads written before hold
  one node per write (``w``), read the same way (``_lg_keys.write_records``).
* ``delete_thread`` and ``prune(strategy="delete")`` reset the thread scope
  (the nodes are gone). ``delete_for_runs`` and ``prune("keep_latest")`` hide
  checkpoints with a tombstone (``lgc:<ns>;del``), then remove for real what only
  the hidden checkpoints needed (their nodes, their pending writes, values and
  messages no live checkpoint or write references: ``_lg_reclaim``) as ``tether
  prune`` does: recorded, fenced like a reset, atomic, ``verify`` still proves the
  rest.

Sync methods (``put``, ``get_tuple``, ``list``...) run the async ones on the
store's home event loop (``_sync.LoopBridge``): the caller's loop when the saver
was made inside one, else a private loop thread the saver owns.
"""

from __future__ import annotations

import builtins
import random
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..control.prune import prune_selected
from ..core.errors import Conflict, InvalidRequest, StoreError
from ..core.graph import CausalNode
from ..store import Store, open_store
from ..store.base import Head
from ..store.txn import Transaction, transact
from ._lg_codec import own, pack, ref_ids, unpack
from ._lg_history import delta_history
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
    write_records,
)
from ._lg_reclaim import unreachable
from ._lg_values import Plan, ValueCodec
from ._sync import LoopBridge, ScopeLocks
from ._values import LRU, Planned, dedupe

__all__ = ["TetherSaver"]

_PAGE: Final = 256
_ALL: Final = 1_000_000  # "every version" for the few small per-checkpoint keys
_GUESS: Final = 16  # up to this many unseen planned nodes are taken as new without a read
_LG_TYPES: Final = frozenset({"el", "val", "seq", "cp", "id", "w", "ws", "del", "odd", "ns"})
_CONTENT_TYPES: Final = frozenset({"el", "val", "seq"})
_TIP_KEYS: Final = 16  # resource heads a tip remembers (the newest ones)
_TIP_ALL: Final = 2048  # a tip lists its scope's resource keys (hashes) up to this many


class _Keys:
    """Every resource key of a thread scope, when this saver wrote every node of it
    since it was empty (at one generation): answers "this key has no version" for the
    keys a put or put_writes is about to create, which saves their reads.

    ``hashes``: the keys' hashes, up to ``_TIP_ALL`` (a collision only costs a read);
    ``last``: for the per-checkpoint keys (``lgi:<ns>;<id>``, ``lgw:<ns>;<id>``), the
    greatest id after each ``<kind>:<ns>;`` prefix, so a key past it has no version
    however long the thread (LangGraph's checkpoint ids grow with time).
    """

    __slots__ = ("hashes", "last")

    def __init__(self) -> None:
        self.hashes: set[int] | None = set()
        self.last: dict[str, str] = {}

    def add(self, key: str) -> None:
        if self.hashes is not None:
            self.hashes.add(hash(key))
            if len(self.hashes) > _TIP_ALL:
                self.hashes = None
        if key.startswith(("lgi:", "lgw:")):
            prefix, _, rest = key.partition(";")  # an encoded ns holds no ';'
            if rest > self.last.get(prefix, ""):
                self.last[prefix] = rest

    def none(self, key: str) -> bool:
        """True if ``key`` has no version (False: it may have one)."""
        if self.hashes is not None:
            return hash(key) not in self.hashes
        if key.startswith(("lgi:", "lgw:")):
            prefix, _, rest = key.partition(";")
            return rest > self.last.get(prefix, "")
        return False


class _Tip:
    """A thread scope as this saver's own last commit left it: the head, and the
    resource heads (and complete pending-write sets) it knew at that head.

    ``keys``: every resource key at ``head`` (``_Keys``), when this saver wrote every
    node of the scope since it was empty at this generation; else None.
    ``latest``: per encoded checkpoint namespace, its latest checkpoint node at ``head``
    (the newest put), for the namespaces this saver put or read at that head.
    """

    __slots__ = ("head", "keys", "latest", "nodes", "writes")

    def __init__(
        self,
        head: Head,
        nodes: dict[str, CausalNode | None],
        writes: dict[str, frozenset[tuple[str, int]]],
        keys: _Keys | None,
        latest: dict[str, CausalNode | None],
    ) -> None:
        self.head, self.nodes, self.writes, self.keys = head, nodes, writes, keys
        self.latest = latest


class _Scope:
    """One transaction attempt's view of a thread scope.

    Seeded with the saver's tip, the transaction computes against the head this
    saver's last commit left, and the resource heads known at that head need no
    read. The commit checks that head's (generation, sequence): if anyone wrote
    the scope since (another process, a reset), it raises ``Conflict`` and
    nothing is written; ``transact`` retries unseeded, from fresh reads.
    """

    def __init__(
        self,
        txn: Transaction,
        scope: str,
        tip: _Tip | None,
        saver: TetherSaver | None = None,
    ) -> None:
        self.txn, self.scope, self.saver = txn, scope, saver
        self.start: Head | None = None  # the head the attempt computed against
        self.nodes: dict[str, CausalNode | None] = {}
        # encoded checkpoint ns -> its latest checkpoint node at the start (``latest``)
        self.latest: dict[str, CausalNode | None] = {}
        self.writes: dict[str, frozenset[tuple[str, int]]] = {}
        self.keys: _Keys | None = None  # every resource key at the start (``_Tip``)
        self.seeded: Head | None = None  # the tip's head, which the known heads are at
        if tip is not None:
            txn.seed(scope, tip.head)
            self.seeded = tip.head
            # The known resource heads are handed to the transaction one key at a time,
            # when asked for (``resource_head``): a put touches three or four keys.
            self.nodes = dict(tip.nodes)
            self.writes = dict(tip.writes)
            self.keys = tip.keys
            self.latest = dict(tip.latest)

    async def head(self) -> Head:
        self.start = await self.txn.head(self.scope)
        if self.keys is None and self.start.sequence == 0:
            self.keys = _Keys()  # an empty scope (new, or just reset) has no keys
        return self.start

    async def resource_head(self, key: str) -> CausalNode | None:
        """The key's head at the start; an append to the key reuses it (no read)."""
        if key in self.nodes:
            node = self.nodes[key] = self.nodes.pop(key)  # the newest a tip keeps
            if self.seeded is not None:
                # known at the seeded head (or read at it): a no-op for another head
                self.txn.hint_resource(
                    self.scope, key, None if node is None else node.id, at=self.seeded
                )
            return node
        if self.keys is not None and self.start is not None and self.keys.none(key):
            # no version at the head this attempt computes against
            self.txn.hint_resource(self.scope, key, None, at=self.start)
            self.nodes[key] = None
            return None
        node = await self.txn.resource_head(self.scope, key)
        self.nodes[key] = node
        return node

    async def latest_checkpoint(self, ns: str) -> CausalNode | None:
        """The namespace's latest checkpoint node at the start (the newest put, not
        hidden): known from the tip or a put of this attempt, else read."""
        e = enc_ns(ns)
        if e in self.latest:
            return self.latest[e]
        assert self.saver is not None and self.start is not None
        node = await self.saver._latest(self.scope, ns)
        self.latest[e] = node
        return node

    def tip(self) -> _Tip | None:
        """After the commit: the scope as it left it (None if it wrote nothing)."""
        head = self.txn.committed_head(self.scope)
        base = self.txn.base(self.scope)
        if head is None or base is None or self.start is None:
            return None
        if (base.generation, base.sequence) != (self.start.generation, self.start.sequence):
            return None  # a replay re-read a newer head: what was read here may be older
        nodes, keys = self.nodes, self.keys
        for n in self.txn.pending(self.scope):  # every key this commit appended to
            if n.resource_key is not None:
                nodes.pop(n.resource_key, None)
                nodes[n.resource_key] = n
                if keys is not None:
                    keys.add(n.resource_key)
        if keys is not None and len(keys.last) > _TIP_ALL:
            keys = None  # thousands of checkpoint namespaces: reads instead
        # The attempt's own dicts (copies of the tip it started from, which it alone
        # holds) are handed on as they are when small: the usual case.
        return _Tip(head, _newest(nodes), _newest(self.writes), keys, _newest(self.latest))


def _newest(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` when it holds at most ``_TIP_KEYS`` entries, else its newest ones."""
    if len(d) <= _TIP_KEYS:
        return d
    return dict(builtins.list(d.items())[-_TIP_KEYS:])


# -- the saver -------------------------------------------------------------------


class TetherSaver(BaseCheckpointSaver[str]):
    """LangGraph's ``BaseCheckpointSaver`` over a tether store (sync and async methods).

    ``namespace`` is the tether namespace (tenant) that holds the threads; ``llm``
    names the conversation the messages belong to in tether's views.
    """

    def __init__(
        self,
        store: Store,
        *,
        namespace: str = "default",
        llm: str = "agent",
        serde: SerializerProtocol | None = None,
        loop: Any = None,
    ) -> None:
        super().__init__(serde=serde)
        self.store = store
        self.namespace = namespace
        self.llm = llm
        # loop=False: from_url sets the bridge itself
        self._bridge = LoopBridge(loop or None, private=loop is False)
        self._owns_store = False
        # values to nodes and back, and the caches that make it cheap (shared by a
        # with_allowlist copy, as every attribute is; they never change what is stored)
        self._values = ValueCodec()
        # scope -> (generation, ids known to be stored): sound because a scope only
        # loses nodes through a reset, which bumps its generation.
        self._known: LRU[str, tuple[int, set[str]]] = LRU(1024)
        # (scope, generation, ns, checkpoint id) -> the checkpoint node this saver put
        # (the newest put of that id by this saver): put_writes anchors writes on it
        # without reading the id pointer.
        self._anchors: LRU[tuple[str, int, str, str], str] = LRU(4096)
        # scope -> the scope as this saver's last commit there left it (``_Scope``)
        self._tips: LRU[str, _Tip] = LRU(512)
        # this saver's writes to one thread, one at a time (``ScopeLocks``)
        self._writing = ScopeLocks()
        # (scope, ns) -> the newest nodes of a thread as the last delta-history walk read
        # them, with their generation (``_lg_history._Pages``)
        self._recent: LRU[tuple[str, str], tuple[int, builtins.list[CausalNode]]] = LRU(32)

    # -- opening and closing ---------------------------------------------------

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> TetherSaver:
        """Open a store by URL; the saver owns (and closes) it. Works in sync and async code.

        The store lives on a private loop thread. For ``memory://`` and SQLite the
        sync methods run in the caller's thread, without a hop to that loop (the
        store belongs to no loop and only this saver uses it; ``_sync.LoopBridge``),
        and the loop thread starts only if a call needs it.
        """
        bridge = LoopBridge(private=True, inline=_loop_free(url))
        try:
            # Opening SQLite or memory:// commits nothing; a SQLite connection left by
            # an open abandoned for the loop closes when it is collected.
            store = bridge.run_sync(lambda: open_store(url))
        except BaseException:
            bridge.stop()
            raise
        saver = cls(store, loop=False, **kw)
        saver._bridge = bridge
        saver._owns_store = True
        return saver

    @classmethod
    async def afrom_url(cls, url: str, **kw: Any) -> TetherSaver:
        """Open a store by URL on the running loop; the saver owns (and closes) it."""
        store = await open_store(url)
        saver = cls(store, **kw)
        saver._owns_store = True
        return saver

    def close(self) -> None:
        """Close the store if the saver opened it, and stop its private loop (any thread)."""
        if self._owns_store:
            self._bridge.run_sync(self.store.close)
            self._owns_store = False
        self._bridge.stop()

    async def aclose(self) -> None:
        if self._owns_store:
            self._owns_store = False
            await self._bridge.run(self.store.close)
        if self._bridge.owns_loop:
            self._bridge.stop()

    def __enter__(self) -> TetherSaver:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> TetherSaver:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- versions ----------------------------------------------------------------

    def get_next_version(self, current: str | None, channel: None = None) -> str:
        """LangGraph's own string versions: ``<32-digit counter>.<random>``, increasing."""
        if current is None:
            n = 0
        elif isinstance(current, int):
            n = current
        else:
            n = int(str(current).split(".")[0])
        return f"{n + 1:032}.{random.random():016}"

    # -- the async API -----------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._bridge.run(lambda: self._get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for t in self._bridge.iterate(self._iter(config, filter, before, limit)):
            yield t

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._bridge.run(lambda: self._put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._bridge.run(lambda: self._put_writes(config, writes, task_id, task_path))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """``DeltaChannel`` history: the parent chain's writes in a few batched reads."""
        return await self._bridge.run(lambda: delta_history(self, config, channels))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._bridge.run(lambda: self._delete_thread(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._bridge.run(lambda: self._delete_for_runs(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._bridge.run(lambda: self._copy_thread(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._bridge.run(lambda: self._prune(thread_ids, strategy))

    # -- the sync API (same work, on the home loop) -------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._bridge.run_sync(lambda: self._get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._bridge.iterate_sync(self._iter(config, filter, before, limit))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._bridge.run_sync(lambda: self._put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._bridge.run_sync(lambda: self._put_writes(config, writes, task_id, task_path))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._bridge.run_sync(lambda: delta_history(self, config, channels))

    def delete_thread(self, thread_id: str) -> None:
        self._bridge.run_sync(lambda: self._delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._bridge.run_sync(lambda: self._delete_for_runs(run_ids), rerun_safe=False)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._bridge.run_sync(
            lambda: self._copy_thread(source_thread_id, target_thread_id), rerun_safe=False
        )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._bridge.run_sync(lambda: self._prune(thread_ids, strategy), rerun_safe=False)

    # -- values (``_lg_values``) ---------------------------------------------------

    def _encode(
        self, value: Any, slot: tuple[str, str, str] | None = None, *, draft: bool = False
    ) -> tuple[dict[str, Any], Plan]:
        """(reference stored in the checkpoint or write, nodes the reference needs)."""
        return self._values.encode(self.serde, self.llm, value, slot, draft=draft)

    def _listed_channels(self, scope: str, e: str, cid: str) -> frozenset[str]:
        """The channels whose list checkpoint ``cid`` holds, if this saver's last commit
        to ``scope`` left that checkpoint as the namespace's latest (no read); else none.

        A pending write to such a channel is a copy of what the next checkpoint will
        hold once the channel's reducer ran, so its messages without an id are drafts
        (``message_fields``). A ``DeltaChannel`` has no list in a checkpoint (its
        writes are its record), and a channel not yet written has none either: their
        writes keep their conversation kinds.
        """
        tip = self._tips.get(scope)
        node = tip.latest.get(e) if tip is not None else None
        if node is None or node.payload.get("id") != cid:
            return frozenset()
        values = node.payload.get("values") or {}
        return frozenset(k for k, ref in values.items() if isinstance(ref, dict) and "n" in ref)

    async def _resolve(
        self,
        scope: str,
        refs: Sequence[dict[str, Any]],
        known: dict[str, CausalNode] | None = None,
    ) -> builtins.list[Any]:
        """Values of references (``known``: nodes the caller already read)."""
        return await self._values.resolve(
            self.serde, self.store, self.namespace, scope, refs, known
        )

    # -- reading -------------------------------------------------------------------

    async def _pointer(self, scope: str, e: str, cid: str) -> CausalNode | None:
        """The newest put of checkpoint ``cid`` (None: never put, or hidden). Its id key's
        head is the checkpoint node itself, or (threads written before) a pointer node
        naming it, or a pointer marked deleted."""
        ptr = await self.store.resource_head(self.namespace, scope, id_key(e, cid))
        if ptr is None or ptr.payload.get("lg") == "cp":
            return ptr
        target = _target(ptr)
        if target is None:
            return None
        got = await self.store.get_nodes(self.namespace, scope, [target])
        return got.get(target)

    async def _deleted(self, scope: str, e: str) -> set[str]:
        tombs = await self.store.versions(self.namespace, scope, del_key(e), limit=_ALL)
        return {i for t in tombs for i in t.payload["nodes"]}

    async def _latest(self, scope: str, ns: str) -> CausalNode | None:
        return (await self._newest(scope, ns))[0]

    async def _newest(
        self, scope: str, ns: str, *, own: bool = True
    ) -> tuple[CausalNode | None, bool]:
        """The namespace's newest put that is not hidden, and True when it is known to
        have no pending writes. Threads written before keep every checkpoint under
        ``lgc:<ns>;cp`` (its head is the newest); now that key holds a marker (``ns``)
        and the newest is found walking back from the thread's end. A checkpoint that
        is the thread's newest node has no writes unless written before its put, which
        the ``odd`` key records: then its writes need no read."""
        e = enc_ns(ns)
        mine = await self._own_latest(scope, e, None) if own else None
        if mine is not None:
            return mine
        heads = await self.store.resource_heads(self.namespace, scope, prefix=f"lgc:{e};")
        head = heads.get(cp_key(e))
        if head is None:
            return None, False
        dead = await self._deleted(scope, e) if del_key(e) in heads else set()
        if head.payload.get("lg") == "cp":
            if head.id not in dead:
                return head, False
        else:
            last = await self.store.nodes(self.namespace, scope, limit=1, descending=True)
            n = last[0] if last else None
            if n is not None and _is_checkpoint(n) and n.payload["ns"] == ns and n.id not in dead:
                return n, odd_key(e) not in heads
        async for node in self._scan(scope, ns, None, heads=heads):
            return node, False
        return None, False

    async def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = configurable(config)
        scope = thread_scope(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "") or ""
        cid = get_checkpoint_id(config)
        e = enc_ns(ns)
        mine = await self._own_latest(scope, e, cid)
        if mine is not None:
            return await self._tuple(
                str(conf["thread_id"]), scope, mine[0], no_writes=mine[1], kept=True
            )
        no_writes = False
        if cid:
            node = await self._pointer(scope, e, cid)
        else:
            node, no_writes = await self._newest(scope, ns, own=False)  # tried above
        if node is None:
            return None
        return await self._tuple(str(conf["thread_id"]), scope, node, no_writes=no_writes)

    async def _own_latest(
        self, scope: str, e: str, cid: str | None
    ) -> tuple[CausalNode, bool] | None:
        """The namespace's latest checkpoint as this saver's own last commit to ``scope``
        left it, when nothing was written to the scope since (its head is still the
        one that commit left: one head read, no other), and that checkpoint is ``cid``
        if given; with True when the saver knows it has no pending writes (it wrote
        every node of the scope). None: read the store."""
        tip = self._tips.get(scope)
        if tip is None:
            return None
        node = tip.latest.get(e)
        if node is None or (cid and node.payload["id"] != cid):
            return None
        keys = tip.keys
        if keys is None and tip.nodes.get(del_key(e), False) is not None:
            return None  # tombstones may hide it
        if keys is not None and not keys.none(del_key(e)):
            return None
        head = await self.store.head(self.namespace, scope)
        if (head.generation, head.sequence) != (tip.head.generation, tip.head.sequence):
            return None
        return node, keys is not None and keys.none(w_key(e, node.payload["id"]))

    async def _tuple(
        self,
        thread_id: str,
        scope: str,
        node: CausalNode,
        *,
        no_writes: bool = False,
        kept: bool = False,
    ) -> CheckpointTuple:
        """``kept``: ``node`` is one the saver keeps (``_Tip``), so what the tuple hands
        out is copied (LangGraph edits the checkpoint it reads in place)."""
        p = node.payload
        if kept:
            p = {**p, "checkpoint": own(p["checkpoint"]), "metadata": own(p["metadata"])}
        ns, cid = p["ns"], p["id"]
        stored = (
            []
            if no_writes
            else await self.store.versions(
                self.namespace, scope, w_key(enc_ns(ns), cid), limit=_ALL
            )
        )
        writes = effective_writes([w.payload for w in stored])
        channels = list(p["values"])
        refs = [p["values"][c] for c in channels] + [w["value"] for w in writes]
        values = await self._resolve(scope, refs)
        checkpoint = unpack(self.serde, p["checkpoint"])
        checkpoint["channel_values"] = dict(zip(channels, values[: len(channels)], strict=True))
        pending: builtins.list[PendingWrite] = [
            (w["task"], w["channel"], v)
            for w, v in zip(writes, values[len(channels) :], strict=True)
        ]

        def cfg(checkpoint_id: str) -> RunnableConfig:
            return {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            }

        return CheckpointTuple(
            config=cfg(cid),
            checkpoint=checkpoint,
            metadata=unpack(self.serde, p["metadata"]),
            parent_config=cfg(p["parent"]) if p.get("parent") else None,
            pending_writes=pending,
        )

    async def _thread_scopes(self) -> AsyncIterator[str]:
        after: str | None = None
        while True:
            page = await self.store.list_scopes(
                self.namespace, prefix="thread:", after=after, limit=100
            )
            for info in page:
                yield info.scope
            if len(page) < 100:
                return
            after = page[-1].scope

    async def _scan(
        self,
        scope: str,
        ns: str | None,
        before_id: str | None,
        anchor_ns: str | None = None,
        *,
        heads: Mapping[str, CausalNode] | None = None,
    ) -> AsyncIterator[CausalNode]:
        """Live checkpoint nodes of a thread (one namespace or all), newest first.

        Walks the thread's nodes backwards by sequence, a page at a time (the first
        one small: the newest checkpoint is usually among the last nodes), so
        ``limit=N`` reads about N steps' worth of nodes. Puts are in LangGraph
        id order, so sequence order is checkpoint-id order. ``heads``: the thread's
        ``lgc:`` heads (of ``ns`` at least), if the caller read them.
        """
        if heads is None:
            heads = await self.store.resource_heads(self.namespace, scope, prefix="lgc:")
        if not heads:
            return
        want = None if ns is None else cp_key(enc_ns(ns))
        if want is not None and want not in heads:
            return
        deleted: set[str] = set()
        for k in heads:
            if k.endswith(";del") and (ns is None or k == del_key(enc_ns(ns))):
                deleted |= await self._deleted(scope, k[4:-4])
        start: int | None = None
        anchor_ns = ns if ns is not None else anchor_ns
        if before_id is not None and anchor_ns is not None:
            anchor = await self._pointer(scope, enc_ns(anchor_ns), before_id)
            if anchor is not None:
                # "before" is put order: what was put before that checkpoint, whatever
                # its id (LangGraph's ids are time-ordered, a caller's need not be)
                start = anchor.sequence
        anchored = start is not None
        seen: set[tuple[str, str]] = set()
        size = 4
        while True:
            page = await self.store.nodes(
                self.namespace, scope, before=start, limit=size, descending=True
            )
            for n in page:
                if not _is_checkpoint(n) or (ns is not None and n.payload["ns"] != ns):
                    continue
                if n.id in deleted:
                    continue
                key = (n.payload["ns"], n.payload["id"])
                if key in seen:
                    continue  # an older put of the same checkpoint id
                seen.add(key)
                if before_id is not None and (
                    n.payload["id"] == before_id if anchored else n.payload["id"] >= before_id
                ):
                    continue  # with no stored anchor, ids compare as LangGraph's savers do
                yield n
            # not ``len(page) < size``: a pruned scope's pages may come back short
            if not page or page[-1].sequence <= 1:
                return
            start = page[-1].sequence
            size = _PAGE

    async def _iter(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> AsyncIterator[CheckpointTuple]:
        if limit is not None and limit <= 0:
            return
        before_id = get_checkpoint_id(before) if before else None
        if config is not None:
            conf = configurable(config)
            ns: str | None = conf.get("checkpoint_ns")
            cid = conf.get("checkpoint_id")
            threads: AsyncIterator[str] = _one(thread_scope(conf["thread_id"]))
        else:
            ns, cid = None, None
            threads = self._thread_scopes()
        before_ns = ns
        if before is not None and before_ns is None:
            before_ns = before.get("configurable", {}).get("checkpoint_ns")
        count = 0
        async for scope in threads:
            thread_id = scope[len("thread:") :]
            async for node in self._scan(scope, ns, before_id, before_ns):
                p = node.payload
                if cid and p["id"] != cid:
                    continue
                if filter:
                    md = unpack(self.serde, p["metadata"])
                    if not all(md.get(k) == v for k, v in filter.items()):
                        continue
                yield await self._tuple(thread_id, scope, node)
                count += 1
                if limit is not None and count >= limit:
                    return

    # -- writing -------------------------------------------------------------------

    def _known_ids(self, scope: str, generation: int) -> set[str]:
        entry = self._known.get(scope)
        if entry is None or entry[0] != generation:
            entry = (generation, set())
            self._known.put(scope, entry)
        return entry[1]

    async def _append_missing(
        self,
        txn: Transaction,
        scope: str,
        plans: Sequence[Plan],
        stored: Sequence[str] = (),
    ) -> builtins.list[str]:
        """Append the planned nodes the scope does not hold yet; return their ids.

        ``stored``: ids the caller knows the scope holds at this transaction's
        generation (parents it will name), passed on to the transaction.
        """
        generation = (await txn.head(scope)).generation
        known = self._known_ids(scope, generation)
        planned: builtins.list[Planned] = []
        hints: builtins.list[str] = list(stored)
        for plan in plans:
            if plan.base is not None and all(b in known for b in plan.base):
                # The slot's previous list is stored at this generation: only its
                # new nodes can be missing (``Plan``).
                planned.extend(plan.new)
                hints.extend(plan.base)
                hints.extend(plan.stored)
            else:
                planned.extend(plan.all())
        unique = dedupe(planned)
        todo = [p for p in unique if p.id not in known]
        if not todo:
            # every node is stored: say so, which saves the parent checks of the
            # nodes that name them
            hints.extend(p.id for p in unique)
            if hints:
                await txn.hint(scope, stored=hints)
            return []
        found: Collection[str] = ()
        if len(todo) > _GUESS:
            # Many ids this saver has not seen stored (a new process, a copied
            # thread): ask which exist, in one read.
            found = await self.store.get_nodes(self.namespace, scope, [p.id for p in todo])
            known.update(found)
        # The few others are new content (new messages, the tree's right spine): say
        # so, which saves the transaction a look-up per node; one stored meanwhile by
        # another writer makes the commit replay with look-ups.
        await txn.hint(
            scope,
            stored=[*hints, *(p.id for p in unique if p.id in known), *found],
            absent=[p.id for p in todo if p.id not in found],
        )
        added: builtins.list[str] = []
        for p in todo:
            if p.id in found:
                continue
            node = await txn.append(scope, p.kind, p.payload, parents=p.parents)
            if node.id != p.id:  # the identity rule changed under us: never store garbage
                raise StoreError(f"planned node {p.id} was computed as {node.id}")
            added.append(p.id)
        return added

    @staticmethod
    async def _mark_odd(txn: Transaction, scope: str, e: str, cid: str) -> None:
        """Record that checkpoint ``cid`` may have writes below its newest put (it was put
        again, or written to before its put): the history read checks its writes by key."""
        await txn.append(scope, "resource", {"lg": "odd", "id": cid}, resource_key=odd_key(e))

    def _remember(self, scope: str, generation: int, ids: Sequence[str]) -> None:
        self._known_ids(scope, generation).update(ids)

    async def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        conf = configurable(config)
        thread_id = conf["thread_id"]
        scope = thread_scope(thread_id)
        ns = conf.get("checkpoint_ns", "") or ""
        parent_id = conf.get("checkpoint_id")
        e = enc_ns(ns)
        header = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        values = checkpoint.get("channel_values", {})
        versions = checkpoint.get("channel_versions", {})
        md = get_serializable_checkpoint_metadata(config, metadata)
        # CPU work first, outside the transaction: encode every changed channel.
        changed: dict[str, tuple[dict[str, Any], Plan] | None] = {
            k: (self._encode(values[k], (scope, ns, k)) if k in values else None)
            for k in new_versions
        }
        base = {
            "lg": "cp",
            "ns": ns,
            "id": checkpoint["id"],
            "parent": parent_id,
            "ts": checkpoint.get("ts"),
            "checkpoint": pack(self.serde, header),
            "metadata": pack(self.serde, md),
        }

        async def carried(view: _Scope) -> dict[str, Any]:
            """Refs of unchanged channels, from the parent checkpoint (usually the head)."""
            need = [k for k in versions if k not in new_versions]
            if not need:
                return {}
            head = await view.latest_checkpoint(ns)
            parent = head if head is not None and head.payload["id"] == parent_id else None
            if parent is None and parent_id:
                parent = await self._pointer(scope, e, parent_id)
            sources = [n for n in (parent, head) if n is not None]
            if head is not None and parent is head:
                sources = [head]
            refs: dict[str, Any] = {}
            for src in sources:
                have = src.payload["values"]
                if not any(k not in refs and k in have for k in need):
                    continue
                seen = _versions_of(self, src)
                for k in need:
                    if k not in refs and k in have and seen.get(k) == versions[k]:
                        refs[k] = have[k]
            return refs

        views: builtins.list[_Scope] = []

        async def fn(txn: Transaction) -> tuple[int, builtins.list[str]]:
            # the first attempt starts from this saver's own last commit, if any
            view = _Scope(txn, scope, None if views else self._tips.get(scope), self)
            views.append(view)
            generation = (await view.head()).generation
            refs = await carried(view)
            # A carried reference is a parent of a stored checkpoint node, so stored.
            stored = [i for ref in refs.values() for i in ref_ids(ref)]
            plans: builtins.list[Plan] = []
            for k in versions:
                if k in refs or k in changed:
                    continue
                if k in values:  # no stored value for this version: keep the one given
                    changed[k] = self._encode(values[k], (scope, ns, k))
            for k, enc in changed.items():
                if enc is not None and k in versions:
                    refs[k] = enc[0]
                    plans.append(enc[1])
            added = await self._append_missing(txn, scope, plans, stored)
            payload = {**base, "values": {k: refs[k] for k in sorted(refs)}}
            ik = id_key(e, checkpoint["id"])
            if await view.resource_head(ik) is not None:
                await self._mark_odd(txn, scope, e, checkpoint["id"])
            marker = await view.resource_head(cp_key(e))
            if marker is None or marker.payload.get("lg") != "ns":
                # The namespace's checkpoints are found by id from here on (``_latest``)
                await txn.append(scope, "resource", {"lg": "ns", "ns": ns}, resource_key=cp_key(e))
            frontier = await txn.frontier(scope)
            parents = set(frontier)
            for ref in refs.values():
                parents.update(ref_ids(ref))
            # The node holds this put's checkpoint id and ts, so it is new: the
            # transaction need not look it up when every parent is stored (were it
            # stored, the commit reports it and the transaction replays with look-ups).
            # Its key is its id: found by id in one read, an earlier put of the same
            # id (its key's head) a parent.
            node = await txn.append(
                scope, "resource", payload, parents=sorted(parents), resource_key=ik, new=True
            )
            view.latest.pop(e, None)
            view.latest[e] = node
            return generation, [*added, node.id]

        async with self._writing.hold(scope):
            generation, added = await transact(self.store, self.namespace, fn)
            self._settle(scope, views[-1])
            self._remember(scope, generation, added)
            self._anchors.put((scope, generation, e, checkpoint["id"]), added[-1])
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        conf = configurable(config)
        scope = thread_scope(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "") or ""
        cid = conf.get("checkpoint_id")
        if not cid:
            raise InvalidRequest("put_writes needs a config with a checkpoint_id", field="config")
        e = enc_ns(ns)
        listed = self._listed_channels(scope, e, cid)
        encoded = [
            (
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                self._encode(value, draft=channel in listed),
            )
            for idx, (channel, value) in enumerate(writes)
        ]

        views: builtins.list[_Scope] = []
        wk = w_key(e, cid)

        async def fn(txn: Transaction) -> tuple[int, builtins.list[str]]:
            view = _Scope(txn, scope, None if views else self._tips.get(scope), self)
            views.append(view)
            generation = (await view.head()).generation
            # The key's head is read once (the appends below reuse it); the earlier
            # writes only when there are some (the first put_writes of a step has none)
            # and this saver's last commit did not leave them.
            have: set[tuple[str, int]] = set()
            if encoded and await view.resource_head(wk) is not None:
                known = view.writes.get(wk)
                if known is None:
                    stored = await self.store.versions(self.namespace, scope, wk, limit=_ALL)
                    known = frozenset(
                        (w["task"], w["idx"]) for w in write_records([w.payload for w in stored])
                    )
                have = set(known)
            # The checkpoint node this saver put for cid at this generation, if any (a
            # pointer is never removed but by a reset, which bumps the generation); else
            # the id key's head says whether cid was put at all.
            anchor = self._anchors.get((scope, generation, e, cid))
            if anchor is None:
                ptr = await view.resource_head(id_key(e, cid))
                anchor = _target(ptr)
                if ptr is None and encoded:
                    await self._mark_odd(txn, scope, e, cid)
            # One node holds this call's writes (``ws``), in order; a regular write
            # is stored once per (task, idx), LangGraph's rule.
            batch: builtins.list[tuple[int, str, dict[str, Any], Plan]] = []
            for idx, channel, (ref, plan) in encoded:
                if idx >= 0 and (task_id, idx) in have:
                    continue
                have.add((task_id, idx))
                batch.append((idx, channel, ref, plan))
            added: builtins.list[str] = []
            if batch:
                # the anchor is a checkpoint node put (and committed) at this generation
                anchored = [anchor] if anchor else []
                added += await self._append_missing(txn, scope, [b[3] for b in batch], anchored)
                parents = {i for b in batch for i in ref_ids(b[2])}
                if anchor:
                    parents.add(anchor)
                else:
                    parents.update(await txn.frontier(scope))
                node = await txn.append(
                    scope,
                    "resource",
                    {
                        "lg": "ws",
                        "cp": cid,
                        "task": task_id,
                        "path": task_path,
                        "writes": [
                            {"idx": idx, "channel": channel, "value": ref}
                            for idx, channel, ref, _ in batch
                        ],
                    },
                    parents=sorted(parents),
                    resource_key=wk,
                )
                added.append(node.id)
            if encoded:
                view.writes.pop(wk, None)
                view.writes[wk] = frozenset(have)  # every (task, idx) of wk at the commit
            return generation, added

        async with self._writing.hold(scope):
            generation, added = await transact(self.store, self.namespace, fn)
            self._settle(scope, views[-1])
            self._remember(scope, generation, added)

    def _settle(self, scope: str, view: _Scope) -> None:
        """Keep the scope as the committed attempt left it, for the next transaction."""
        tip = view.tip()
        if tip is None:
            self._tips.pop(scope)
        else:
            self._tips.put(scope, tip)

    # -- deleting, copying, pruning ----------------------------------------------------

    async def _delete_thread(self, thread_id: str) -> None:
        scope = thread_scope(thread_id)
        if (await self.store.head(self.namespace, scope)).sequence:
            await self.store.reset_scope(self.namespace, scope)
        self._known.pop(scope)
        self._tips.pop(scope)

    async def _tombstone(self, scope: str, e: str, victims: Sequence[CausalNode]) -> None:
        if not victims:
            return
        self._anchors.clear()  # writes to a hidden checkpoint anchor as before (frontier)
        self._tips.pop(scope)
        ids = {v.id for v in victims}
        cids = sorted({v.payload["id"] for v in victims})

        async def fn(txn: Transaction) -> None:
            await txn.append(
                scope,
                "resource",
                {"lg": "del", "nodes": sorted(ids), "ids": cids},
                resource_key=del_key(e),
            )
            for cid in cids:
                ptr = await txn.resource_head(scope, id_key(e, cid))
                if _target(ptr) in ids:
                    await txn.append(
                        scope,
                        "resource",
                        {"lg": "id", "id": cid, "deleted": True},
                        resource_key=id_key(e, cid),
                    )

        async with self._writing.hold(scope):
            await transact(self.store, self.namespace, fn)

    async def _live_checkpoints(self, scope: str) -> dict[str, builtins.list[CausalNode]]:
        """Every live checkpoint node of a thread (every put), per encoded namespace,
        oldest first: the thread's nodes read in order, as both layouts keep them."""
        heads = await self.store.resource_heads(self.namespace, scope, prefix="lgc:")
        out: dict[str, builtins.list[CausalNode]] = {}
        dead: set[str] = set()
        for k in heads:
            if k.endswith(";del"):
                dead |= await self._deleted(scope, k[4:-4])
            elif k.endswith(";cp"):
                out[k[4:-3]] = []
        if not out:
            return out
        after = 0
        while True:
            page = await self.store.nodes(self.namespace, scope, after=after, limit=_PAGE)
            for n in page:
                if _is_checkpoint(n) and n.id not in dead:
                    out.setdefault(enc_ns(n.payload["ns"]), []).append(n)
            if not page:  # a pruned scope's pages may come back short
                return out
            after = page[-1].sequence

    async def _delete_for_runs(self, run_ids: Sequence[str]) -> None:
        wanted = set(run_ids)
        if not wanted:
            return
        async for scope in self._thread_scopes():
            hid = False
            for e, nodes in (await self._live_checkpoints(scope)).items():
                victims = [
                    n
                    for n in nodes
                    if unpack(self.serde, n.payload["metadata"]).get("run_id") in wanted
                ]
                await self._tombstone(scope, e, victims)
                hid = hid or bool(victims)
            if hid:
                await self._reclaim(scope)

    async def _reclaim(self, scope: str) -> None:
        """Physically remove what the hidden checkpoints alone needed (``_lg_reclaim``),
        as ``tether prune`` removes nodes: recorded, fenced, atomic. A thread left with
        no checkpoint at all is deleted (a reset, only if nothing was written since)."""
        async with self._writing.hold(scope):
            head = await self.store.head(self.namespace, scope)
            emptied = not any((await self._live_checkpoints(scope)).values())
            if emptied:  # unless writes wait for a checkpoint not put yet (no pointer)
                pointers = await self.store.resource_heads(self.namespace, scope, prefix="lgi:")
                for key in await self.store.resource_heads(self.namespace, scope, prefix="lgw:"):
                    emptied = emptied and "lgi:" + key[4:] in pointers
            try:
                if emptied:
                    await self.store.reset_scope_if(self.namespace, scope, head)
                else:
                    await prune_selected(self.store, self.namespace, scope, unreachable)
            except Conflict:
                pass  # written meanwhile: what it hid stays hidden; a later call frees it
            self._known.pop(scope)
            self._tips.pop(scope)
            self._anchors.clear()

    async def _prune(self, thread_ids: Sequence[str], strategy: str) -> None:
        if strategy not in ("keep_latest", "delete"):
            raise InvalidRequest(
                f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'",
                field="strategy",
            )
        for thread_id in thread_ids:
            scope = thread_scope(thread_id)
            if strategy == "delete":
                await self._delete_thread(thread_id)
                continue
            hid = False
            for e, nodes in (await self._live_checkpoints(scope)).items():
                await self._tombstone(scope, e, nodes[:-1])
                hid = hid or len(nodes) > 1
            if hid:
                await self._reclaim(scope)

    async def _copy_thread(self, source: str, target: str) -> None:
        src, dst = thread_scope(source), thread_scope(target)
        if src == dst:
            raise InvalidRequest("copy_thread needs two different threads", field="target")
        self._tips.pop(dst)
        remap: dict[str, str] = {}  # source checkpoint node id -> target node id
        after = 0
        while True:
            page = await self.store.nodes(self.namespace, src, after=after, limit=_PAGE)
            if not page:
                return
            after = page[-1].sequence
            batch = [
                n for n in page if isinstance(n.payload, dict) and n.payload.get("lg") in _LG_TYPES
            ]
            if batch:
                done = dict(remap)

                async def fn(
                    txn: Transaction,
                    batch: builtins.list[CausalNode] = batch,
                    done: dict[str, str] = done,
                ) -> tuple[int, builtins.list[str], dict[str, str]]:
                    return await self._copy_batch(txn, dst, batch, dict(done))

                async with self._writing.hold(dst):
                    generation, added, remap = await transact(self.store, self.namespace, fn)
                    self._remember(dst, generation, added)

    async def _copy_batch(
        self, txn: Transaction, dst: str, batch: Sequence[CausalNode], remap: dict[str, str]
    ) -> tuple[int, builtins.list[str], dict[str, str]]:
        generation = (await txn.head(dst)).generation
        added: builtins.list[str] = []
        for n in batch:
            p = n.payload
            lg = p["lg"]
            if lg in _CONTENT_TYPES:
                planned = Planned(id=n.id, kind=n.kind, payload=p, parents=n.parents)
                added += await self._append_missing(txn, dst, [Plan(elements=[planned])])
                continue
            parents: set[str] = set()
            if lg == "cp":
                parents.update(await txn.frontier(dst))
                for ref in p["values"].values():
                    parents.update(ref_ids(ref))
                rk = n.resource_key
                if rk and rk.startswith("lgi:") and await txn.resource_head(dst, rk) is not None:
                    # the target held this checkpoint id already: a re-put
                    await self._mark_odd(txn, dst, rk[4:].split(";", 1)[0], p["id"])
            elif lg == "id" and "cp" in p:
                p = {**p, "cp": remap[p["cp"]]}
                parents.add(p["cp"])
                if n.resource_key and await txn.resource_head(dst, n.resource_key) is not None:
                    # the target held this checkpoint id already: a re-put
                    e = n.resource_key[4:].split(";", 1)[0]  # lgi:<e>;<id>, e has no ';'
                    await self._mark_odd(txn, dst, e, p["id"])
            elif lg in ("w", "ws"):
                for w in write_records([p]):
                    parents.update(ref_ids(w["value"]))
                parents.update(remap[x] for x in n.parents if x in remap)
                if not parents:
                    parents.update(await txn.frontier(dst))
            elif lg == "del":
                p = {**p, "nodes": sorted(remap.get(x, x) for x in p["nodes"])}
                parents.update(await txn.frontier(dst))
            else:
                parents.update(await txn.frontier(dst))
            node = await txn.append(
                dst, n.kind, p, parents=sorted(parents), resource_key=n.resource_key
            )
            remap[n.id] = node.id
            added.append(node.id)
        return generation, added, remap


def _loop_free(url: str) -> bool:
    """Stores that belong to no event loop: memory://, and SQLite served inline."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else "sqlite"
    return scheme == "memory" or (scheme == "sqlite" and "offload" not in url)


def _target(ptr: CausalNode | None) -> str | None:
    """The checkpoint node an id key's head stands for: itself (a checkpoint node), the
    node a pointer names (threads written before), None for a deleted pointer or none."""
    if ptr is None:
        return None
    p = ptr.payload
    if p.get("lg") == "cp":
        return ptr.id
    target = p.get("cp")
    return target if isinstance(target, str) else None


def _is_checkpoint(n: CausalNode) -> bool:
    """A checkpoint node: under its namespace's ``lgc:<ns>;cp`` key (threads written
    before) or its own id key ``lgi:<ns>;<id>``."""
    rk = n.resource_key
    return (
        n.kind == "resource"
        and rk is not None
        and rk.startswith(("lgc:", "lgi:"))
        and isinstance(n.payload, dict)
        and n.payload.get("lg") == "cp"
    )


def _versions_of(saver: TetherSaver, node: CausalNode) -> dict[str, Any]:
    header = unpack(saver.serde, node.payload["checkpoint"])
    versions: dict[str, Any] = header.get("channel_versions", {})
    return versions


async def _one(item: str) -> AsyncIterator[str]:
    yield item
