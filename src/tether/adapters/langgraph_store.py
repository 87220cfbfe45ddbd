"""TetherStore: LangGraph's long-term memory ``Store`` on a tether store.

    from tether.adapters.langgraph import TetherSaver
    from tether.adapters.langgraph_store import TetherStore

    store = TetherStore.from_url("sqlite:///agent.db", index={"dims": 256, "embed": embed})
    graph = builder.compile(checkpointer=TetherSaver.from_url("sqlite:///agent.db"), store=store)

Every item is a semantic memory of the scope ``scope`` (default ``app``): type
``lg_store``, key the canonical JSON of ``[*namespace, key]``, content
``{"value", "index", "created_at", "updated_at"}``; a delete is its tombstone. So
items are versioned, exported, verified, reset and erased like any tether memory,
and ``tether.projections.recall`` searches them too.

What LangGraph reads (items by namespace, the vectors of its ``index`` config) is
a projection held in this process: LangGraph's own ``InMemoryStore`` structures,
brought up to the scope's head before every batch (only the nodes after the last
one seen are read; a reset rebuilds it), so several processes on one database see
each other's writes. Searches, filters, namespace listing and scores are
therefore exactly ``InMemoryStore``'s. Writes of one batch commit in one tether
transaction before the batch returns.

TTL (``supports_ttl``; ``ttl=TTLConfig`` for the defaults): an item put with a ``ttl``
(minutes) carries its ``expires_at``; once past it, reads no longer see it, and
``sweep_ttl()`` / ``asweep_ttl()`` tombstones every expired item. A read with
``refresh_ttl`` (the default) moves the expiry of what it returned: a new version of
the item. A sweep that tombstoned or follows a refresh then frees the space for real
(``tether.control.prune.prune_selected``: recorded, fenced, atomic): the older versions
of items that expire and of deleted items go; the current version of each stays, and
items put without a TTL keep their history.
``start_ttl_sweeper()`` / ``stop_ttl_sweeper()`` (a thread) and
``astart_ttl_sweeper()`` / ``astop_ttl_sweeper()`` (a task on the running loop) sweep
every ``sweep_interval_minutes`` of the TTL config, as LangGraph's SQL stores do.

Ops given to ``batch`` are checked like LangGraph's own methods check them (labels
are non-empty strings without periods, ``validate_op_namespace``) before any is run,
and namespaces given as lists are read as tuples.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
)
from langgraph.store.memory import InMemoryStore

from ..control.prune import prune_selected
from ..core import scopes
from ..core.canonical import canonical_json
from ..core.erased import erased_placeholders, is_erased
from ..core.graph import CausalNode
from ..core.vocab import Vocabulary
from ..store import Store, open_store
from ..store.txn import Transaction, transact
from ._sync import LoopBridge, ScopeLocks

try:  # langgraph-checkpoint >= 4.3 checks the labels of ops given to batch
    from langgraph.store.base import validate_op_namespace as _validate_op
except ImportError:  # pragma: no cover - older langgraph-checkpoint
    _validate_op = None  # type: ignore[assignment]

__all__ = ["ITEM_TYPE", "TetherStore"]

ITEM_TYPE = "lg_store"
_PREFIX = f"semantic:{ITEM_TYPE}:"
_VOCAB = Vocabulary([ITEM_TYPE])
_PAGE = 1000


def _superseded(nodes: Sequence[CausalNode]) -> dict[int, str]:
    """What a sweep removes from the Store's scope: every older version of an item that
    expires (a TTL refresh writes a version per read) or that is deleted (expired and
    swept, or deleted by LangGraph). An item's current version (its tombstone, for a
    deleted one) stays, and so does the history of items put without a TTL."""
    versions: dict[str, list[CausalNode]] = {}
    for n in nodes:
        if n.resource_key is not None and n.resource_key.startswith(_PREFIX):
            versions.setdefault(n.resource_key, []).append(n)
    cut: dict[int, str] = {}
    for found in versions.values():
        head = found[-1]
        c = head.payload.get("content") if isinstance(head.payload, dict) else None
        deleted = c is None
        for n in found[:-1]:
            old = n.payload.get("content") if isinstance(n.payload, dict) else None
            if deleted:
                cut[n.sequence] = "deleted_item"
            elif isinstance(old, dict) and old.get("ttl") is not None:
                cut[n.sequence] = "refreshed_ttl"
    return cut


def item_key(namespace: tuple[str, ...], key: str) -> str:
    return canonical_json([*namespace, key]).decode()


class TetherStore(InMemoryStore):
    """A LangGraph ``BaseStore`` (sync and async) whose items live in a tether scope."""

    supports_ttl = True

    def __init__(
        self,
        store: Store,
        *,
        namespace: str = "default",
        scope: str = scopes.APP,
        index: Any = None,
        ttl: TTLConfig | None = None,
        loop: Any = None,
    ) -> None:
        if isinstance(index, dict) and "text_fields" in index and "fields" not in index:
            # SqliteStore's and PostgresStore's name for the fields to embed
            index = {**index, "fields": index["text_fields"]}
        super().__init__(index=index)
        self.ttl_config = ttl
        scopes.parse(scope)
        self.store = store
        self.namespace = namespace
        self.scope = scope
        self._bridge = LoopBridge(loop or None, private=loop is False)
        self._owns_store = False
        self._mark: tuple[int, int] | None = None
        # this store's batches, one at a time: concurrent tasks' puts would otherwise
        # race each other for the scope's head on a pooled store (``ScopeLocks``)
        self._writing = ScopeLocks()
        # (namespace, key) -> (expires at, ttl in minutes) of the items that expire
        self._expiry: dict[tuple[tuple[str, ...], str], tuple[datetime, float]] = {}
        # expired items hidden from reads, not yet tombstoned by a sweep
        self._expired: set[tuple[tuple[str, ...], str]] = set()
        self._refreshed = False  # a read refreshed a TTL since the last sweep
        self._sweeper: tuple[threading.Event, concurrent.futures.Future[None]] | None = None
        self._asweeper: asyncio.Task[None] | None = None

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> TetherStore:
        """Open a store by URL; this TetherStore owns (and closes) it. Sync and async code."""
        scheme = url.split("://", 1)[0].lower() if "://" in url else "sqlite"
        inline = scheme == "memory" or (scheme == "sqlite" and "offload" not in url)
        bridge = LoopBridge(private=True, inline=inline)
        try:
            store = bridge.run_sync(lambda: open_store(url))
        except BaseException:
            bridge.stop()
            raise
        out = cls(store, loop=False, **kw)
        out._bridge = bridge
        out._owns_store = True
        return out

    @classmethod
    async def afrom_url(cls, url: str, **kw: Any) -> TetherStore:
        """Open a store by URL on the running loop; this TetherStore owns (and closes) it."""
        out = cls(await open_store(url), **kw)
        out._owns_store = True
        return out

    def close(self) -> None:
        self.stop_ttl_sweeper(timeout=30)
        if self._owns_store:
            self._bridge.run_sync(self.store.close)
            self._owns_store = False
        self._bridge.stop()

    async def aclose(self) -> None:
        await self.astop_ttl_sweeper(timeout=30)
        if self._owns_store:
            self._owns_store = False
            await self._bridge.run(self.store.close)
        if self._bridge.owns_loop:
            self._bridge.stop()

    # -- the two methods LangGraph asks of a store --------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        todo = _checked(ops)
        return self._bridge.run_sync(lambda: self._batch(todo, aio=False))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        todo = _checked(ops)
        return await self._bridge.run(lambda: self._batch(todo, aio=True))

    async def _batch(self, ops: list[Op], *, aio: bool) -> list[Result]:
        await self._catch_up(aio=aio)
        self._hide_expired()
        results, put_ops, search_ops = self._prepare_ops(ops)
        if search_ops:
            queries = (
                await self._aembed_search_queries(search_ops)
                if aio
                else self._embed_search_queries(search_ops)
            )
            self._batch_search(search_ops, queries, results)
        refresh = self._to_refresh(ops, results, put_ops)
        if put_ops or refresh:
            await self._write(put_ops, refresh=refresh)
            await self._catch_up(aio=aio)
        return results

    # -- TTL -----------------------------------------------------------------------

    def _hide_expired(self) -> list[tuple[tuple[str, ...], str]]:
        """Take expired items out of the view (the graph keeps them until a sweep)."""
        now = datetime.now(UTC)
        gone = [k for k, (at, _) in self._expiry.items() if at <= now]
        self._expired.update(gone)
        for ns, key in gone:
            del self._expiry[(ns, key)]
            if ns in self._data:
                self._data[ns].pop(key, None)
                if not self._data[ns]:
                    del self._data[ns]
            if ns in self._vectors:
                self._vectors[ns].pop(key, None)
        return gone

    def _to_refresh(
        self, ops: list[Op], results: list[Result], put_ops: dict[Any, PutOp]
    ) -> list[tuple[tuple[str, ...], str]]:
        out: list[tuple[tuple[str, ...], str]] = []
        for op, res in zip(ops, results, strict=True):
            if isinstance(op, GetOp | SearchOp) and op.refresh_ttl and res:
                items = res if isinstance(res, list) else [res]
                for it in items:
                    if not isinstance(it, Item):
                        continue
                    k = (tuple(it.namespace), it.key)
                    if k in self._expiry and k not in put_ops and k not in out:
                        out.append(k)
        return out

    def sweep_ttl(self) -> int:
        """Delete (tombstone) every expired item; return how many."""
        return self._bridge.run_sync(self._sweep)

    async def asweep_ttl(self) -> int:
        return await self._bridge.run(self._sweep)

    def _interval(self, minutes: float | None) -> float:
        if minutes is None:
            minutes = (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        return float(minutes) * 60

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items every ``sweep_interval_minutes`` (default: the TTL
        config's, else 5) in a daemon thread until ``stop_ttl_sweeper``."""
        seconds = self._interval(sweep_interval_minutes)
        if self._sweeper is not None:
            return self._sweeper[1]
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        stop = threading.Event()

        def loop() -> None:
            try:
                while not stop.wait(seconds):
                    self.sweep_ttl()
                done.set_result(None)
            except BaseException as e:  # the future reports it
                done.set_exception(e)

        threading.Thread(target=loop, name="tether-ttl-sweeper", daemon=True).start()
        self._sweeper = (stop, done)
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; whether it stopped within ``timeout`` seconds."""
        sweeper = self._sweeper
        if sweeper is None:
            return True
        self._sweeper = None
        sweeper[0].set()
        try:
            sweeper[1].result(timeout)
        except concurrent.futures.TimeoutError:
            return False
        return True

    async def astart_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """The sweeper as a task of the running loop, until ``astop_ttl_sweeper``."""
        seconds = self._interval(sweep_interval_minutes)
        task = self._asweeper
        if task is not None and not task.done():
            return task

        async def loop() -> None:
            while True:
                await asyncio.sleep(seconds)
                await self.asweep_ttl()

        self._asweeper = asyncio.get_running_loop().create_task(loop())
        return self._asweeper

    async def astop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        task, self._asweeper = self._asweeper, None
        if task is None:
            return True
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        return bool(done)

    async def _sweep(self) -> int:
        await self._catch_up(aio=True)
        self._hide_expired()
        gone = sorted(self._expired)
        if gone:
            await self._write({k: PutOp(k[0], k[1], None) for k in gone})
        if gone or self._refreshed:
            # The space comes back: what no read can return any more is removed.
            self._refreshed = False
            async with self._writing.hold(self.scope):
                await prune_selected(self.store, self.namespace, self.scope, _superseded)
        if gone:
            await self._catch_up(aio=True)
        return len(gone)

    # -- writes: one tether transaction per batch ----------------------------------

    async def _write(
        self,
        put_ops: dict[tuple[tuple[str, ...], str], PutOp],
        *,
        refresh: Sequence[tuple[tuple[str, ...], str]] = (),
    ) -> None:
        at = datetime.now(UTC)
        now = at.isoformat()

        def expires(ttl: Any) -> str | None:
            return None if ttl is None else (at + timedelta(minutes=float(ttl))).isoformat()

        if refresh:
            self._refreshed = True  # the next sweep removes the versions refreshed over

        async def stage(t: Transaction) -> None:
            for ns, key in refresh:  # a read moved the item's expiry: a new version
                k = item_key(ns, key)
                head = await t.resource_head(self.scope, _PREFIX + k)
                c = None if head is None else head.payload.get("content")
                if isinstance(c, dict) and not is_erased(c) and c.get("ttl") is not None:
                    await t.semantic(
                        self.scope, ITEM_TYPE, k, {**c, "expires_at": expires(c["ttl"])}
                    )
            for (ns, key), op in put_ops.items():
                k = item_key(ns, key)
                head = await t.resource_head(self.scope, _PREFIX + k)
                content = None if head is None else head.payload.get("content")
                if is_erased(content):
                    content = None
                if op.value is None:
                    if content is not None:
                        await t.semantic(self.scope, ITEM_TYPE, k, None)
                    continue
                index = op.index if op.index is None or op.index is False else list(op.index)
                created = content["created_at"] if isinstance(content, dict) else now
                await t.semantic(
                    self.scope,
                    ITEM_TYPE,
                    k,
                    {
                        "value": dict(op.value),
                        "index": index,
                        "created_at": created,
                        "updated_at": now,
                        "ttl": op.ttl,
                        "expires_at": expires(op.ttl),
                    },
                )

        async with self._writing.hold(self.scope):
            with erased_placeholders():
                await transact(self.store, self.namespace, stage, vocabulary=_VOCAB)

    # -- reads: the projection, brought up to the scope's head ---------------------

    async def _catch_up(self, *, aio: bool) -> None:
        head = await self.store.head(self.namespace, self.scope)
        now = (head.generation, head.sequence)
        if self._mark == now:
            return
        latest: dict[str, CausalNode] = {}
        rebuild = self._mark is None or self._mark[0] != head.generation or self._mark[1] > now[1]
        with erased_placeholders():
            if rebuild:
                latest = await self.store.resource_heads(self.namespace, self.scope, _PREFIX)
            else:
                assert self._mark is not None
                after = self._mark[1]
                while after < now[1]:
                    page = await self.store.nodes(
                        self.namespace, self.scope, after=after, before=now[1] + 1, limit=_PAGE
                    )
                    if not page:
                        break
                    for n in page:
                        if n.resource_key and n.resource_key.startswith(_PREFIX):
                            latest[n.resource_key] = n
                    after = page[-1].sequence
        if rebuild:
            self._data.clear()
            self._vectors.clear()
            self._expiry.clear()
            self._expired.clear()
        embed: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for rk, node in latest.items():
            parts = _decode(rk)
            if parts is None:
                continue
            ns, key = parts
            c = node.payload.get("content") if isinstance(node.payload, dict) else None
            old = self._data.get(ns, {}).get(key)
            self._expiry.pop((ns, key), None)
            self._expired.discard((ns, key))
            if not isinstance(c, dict) or is_erased(c) or is_erased(node.payload):
                self._vectors.get(ns, {}).pop(key, None)
                if ns in self._data:
                    self._data[ns].pop(key, None)
                    if not self._data[ns]:
                        del self._data[ns]
                continue
            self._data[ns][key] = Item(
                value=c["value"],
                key=key,
                namespace=ns,
                created_at=datetime.fromisoformat(c["created_at"]),
                updated_at=datetime.fromisoformat(c["updated_at"]),
            )
            if c.get("expires_at"):
                self._expiry[(ns, key)] = (datetime.fromisoformat(c["expires_at"]), c["ttl"])
            if old is not None and old.value == c["value"] and key in self._vectors.get(ns, {}):
                continue  # the same value (a TTL refresh): its vectors stand
            self._vectors.get(ns, {}).pop(key, None)
            embed[(ns, key)] = PutOp(ns, key, c["value"], index=c.get("index"))
        to_embed = self._extract_texts(embed)
        if to_embed and self.index_config and self.embeddings:
            texts = list(to_embed)
            vectors = (
                await self.embeddings.aembed_documents(texts)
                if aio
                else self.embeddings.embed_documents(texts)
            )
            self._insertinmem_store(to_embed, vectors)
        self._mark = now


def _checked(ops: Iterable[Op]) -> list[Op]:
    """The ops with list namespaces read as tuples, each checked as LangGraph's methods
    check namespaces (all before any runs: an invalid op fails the whole batch)."""
    out: list[Op] = []
    for op in ops:
        if isinstance(op, GetOp | PutOp) and not isinstance(op.namespace, tuple):
            op = op._replace(namespace=tuple(op.namespace))
        elif isinstance(op, SearchOp) and not isinstance(op.namespace_prefix, tuple):
            op = op._replace(namespace_prefix=tuple(op.namespace_prefix))
        elif isinstance(op, ListNamespacesOp) and op.match_conditions:
            op = op._replace(
                match_conditions=tuple(
                    MatchCondition(c.match_type, tuple(c.path)) for c in op.match_conditions
                )
            )
        if _validate_op is not None:
            _validate_op(op)
        out.append(op)
    return out


def _decode(rk: str) -> tuple[tuple[str, ...], str] | None:
    import json

    try:
        parts = json.loads(rk[len(_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(parts, list) or len(parts) < 2 or not all(isinstance(p, str) for p in parts):
        return None
    return tuple(parts[:-1]), parts[-1]
