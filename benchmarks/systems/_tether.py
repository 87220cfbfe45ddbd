"""The tether adapter shared by tether_sqlite and tether_postgres.

STATUS: provisional. tether's storage is being written alongside this benchmark; this
adapter skips itself (SkipSystem, with the reason) until the pieces it needs exist:

* ``tether.open_store(url, **options)`` (or ``tether.store.open_store``) returning a
  ``Store`` for ``sqlite:///...`` / ``postgresql://...``;
* a way to append one turn (user + assistant message) to a thread in ONE commit. Until
  the conversation helpers land it uses the core ``Transaction`` directly:
  ``goal`` node for the user message, ``answer`` node for the assistant message, both
  in scope ``thread:<id>`` of namespace ``bench``.

TODO(tether): when the conversation API lands, replace ``write_turn``/``load`` with it
(e.g. ``await conv.append(thread, [user, assistant])`` / ``await conv.messages(thread)``)
so the benchmark measures what users call, and pass the real durability option
(``durability=`` of the SQLite backend, SPEC section 5) instead of the guess below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from .base import SkipSystem, System, pkg_version

NAMESPACE = "bench"


def _open_store_fn() -> Any:
    try:
        import tether
    except ImportError as e:
        raise SkipSystem(f"tether is not importable here: {e}") from e
    fn = getattr(tether, "open_store", None)
    if fn is None:
        try:
            from tether.store import open_store as fn
        except ImportError as e:
            raise SkipSystem(f"tether has no open_store yet: {e}") from e
    return fn


def _transaction_cls() -> Any:
    # TODO(tether): prefer the public conversation helpers once they exist.
    for mod, attr in (("tether", "Transaction"), ("tether._txn", "Transaction")):
        try:
            m = __import__(mod, fromlist=[attr])
        except ImportError:
            continue
        cls = getattr(m, attr, None)
        if cls is not None:
            return cls
    raise SkipSystem("tether has no Transaction / conversation append API yet")


class TetherBase(System):
    """Subclasses set ``name`` and implement ``url``, ``reset`` and ``bytes_on_disk``."""

    #: durability option passed to open_store (TODO(tether): confirm the option's name)
    store_options: ClassVar[dict[str, Any]] = {}

    def url(self, workdir: Path) -> str:
        raise NotImplementedError

    async def reset(self, workdir: Path) -> None:
        """Make the target empty before a fresh run."""

    async def setup(self, workdir: Path, *, fresh: bool) -> None:
        open_store = _open_store_fn()
        self.Transaction = _transaction_cls()
        from tether import scopes

        self.scopes = scopes
        self.workdir = workdir
        if fresh:
            await self.reset(workdir)
        self._durability_note = ""
        try:
            self.store = await open_store(self.url(workdir), **self.store_options)
        except ImportError as e:  # backend module not written yet
            raise SkipSystem(f"tether backend for {self.name} not available yet: {e}") from e
        except TypeError as e:  # option not (yet) accepted
            self._durability_note = f"option {self.store_options} refused ({e}); backend default"
            self.store = await open_store(self.url(workdir))

    async def write_turn(self, thread: str, turn: int, user_msg: str, assistant_msg: str) -> None:
        # TODO(tether): use the conversation append helper (one commit per turn).
        scope = self.scopes.thread(thread)
        txn = self.Transaction(self.store, NAMESPACE)
        await txn.append(scope, "goal", {"role": "user", "content": user_msg})
        await txn.append(scope, "answer", {"role": "assistant", "content": assistant_msg})
        await txn.commit()

    async def load(self, thread: str) -> list[str]:
        # TODO(tether): use the conversation view (buffer policy) instead of raw nodes.
        scope = self.scopes.thread(thread)
        out: list[str] = []
        after = 0
        while True:
            page = await self.store.nodes(NAMESPACE, scope, after=after, limit=1000)
            if not page:
                return out
            for n in page:
                if n.kind in ("goal", "answer"):
                    out.append(str(n.payload["content"]))
            after = page[-1].sequence

    async def close(self) -> None:
        await self.store.close()

    def durability(self) -> dict[str, Any]:
        # The SQLite store keeps its option as ``store.durability`` ("full" = WAL +
        # synchronous=FULL). TODO(tether): a public way to read the effective setting.
        level = getattr(getattr(self, "store", None), "durability", None)
        if self._durability_note:
            setting, strongest = "backend default", False
        elif level is not None:
            setting, strongest = f"durability={level!r}", level == "full"
        else:
            setting, strongest = f"open_store options {self.store_options or '{}'}", True
        return {
            "setting": setting,
            "strongest": strongest,
            "note": self._durability_note or "open_store option; see systems/_tether.py",
        }

    def versions(self) -> dict[str, str]:
        return {"tether": pkg_version("tether")}
