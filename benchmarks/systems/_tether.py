"""The tether adapter shared by tether_sqlite, tether_postgres and tether_redis.

What it drives is tether's public state-layer API, as a program that keeps its own
conversation would:

* ``tether.open_store(url, **options)``, once per process, with the backend's
  strongest durability (``durability="full"``);
* one ``tether.Transaction`` per turn, two appends to scope ``thread:<id>`` of
  namespace ``bench`` (a ``goal`` node for the user message, an ``answer`` node for
  the assistant message, payload ``{"role", "content"}``), one ``commit``: both
  messages are durable, atomically, when it returns;
* for (C), ``store.nodes(namespace, scope, after=..., limit=1000)`` paging, the
  public read of a scope's history in order.

``tether.Agent.step`` writes a turn the same way (it adds an ``inference`` node per
model call) and ``tether.projections.load_conversation`` reads it back through the same
``store.nodes`` pages, then projects the nodes into messages under a memory policy;
the benchmark measures the state layer under both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from .base import SkipSystem, System, pkg_version

NAMESPACE = "bench"


class TetherBase(System):
    """Subclasses set ``name`` and implement ``url``, ``reset`` and ``bytes_on_disk``."""

    #: options passed to ``tether.open_store`` (each backend's strongest durability)
    store_options: ClassVar[dict[str, Any]] = {}

    def url(self, workdir: Path) -> str:
        raise NotImplementedError

    async def reset(self, workdir: Path) -> None:
        """Make the target empty before a fresh run."""

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        try:
            import tether
        except ImportError as e:
            raise SkipSystem(f"tether is not importable here: {e}") from e
        self.Transaction = tether.Transaction
        self.thread_scope = tether.core.scopes.thread
        self.workdir = workdir
        if fresh:
            await self.reset(workdir)
        try:
            self.store: Any = await tether.open_store(self.url(workdir), **self.store_options)
        except ImportError as e:  # the backend's extra (asyncpg, redis) is not installed
            raise SkipSystem(f"tether's {self.name} backend needs an extra: {e}") from e

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        scope = self.thread_scope(thread)
        txn = self.Transaction(self.store, NAMESPACE)
        await txn.append(scope, "goal", {"role": "user", "content": user_msg})
        await txn.append(scope, "answer", {"role": "assistant", "content": assistant_msg})
        await txn.commit()

    async def load(self, thread: str) -> list[str]:
        scope = self.thread_scope(thread)
        out: list[str] = []
        after = 0
        while True:
            page = await self.store.nodes(NAMESPACE, scope, after=after, limit=1000)
            for n in page:
                if n.kind in ("goal", "answer"):
                    out.append(str(n.payload["content"]))
            if len(page) < 1000:
                return out
            after = page[-1].sequence

    async def close(self) -> None:
        await self.store.close()

    def durability(self) -> dict[str, Any]:
        level = getattr(getattr(self, "store", None), "durability", None)
        return {
            "setting": f"durability={level!r}" if level else "server settings",
            "strongest": level in (None, "full"),
            "note": "tether.open_store option (SQLite, PostgreSQL); see systems/_tether.py",
        }

    def versions(self) -> dict[str, str]:
        return {"tether": pkg_version("tether")}

    def remarks(self) -> list[str]:
        return [
            "one Transaction per turn: a goal node (user) and an answer node (assistant), "
            "one commit; store.nodes pages of 1,000 for (C)",
        ]
