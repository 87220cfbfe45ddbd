"""Run a store's coroutines on the one event loop that owns the store.

tether's stores are async, and some of them (asyncpg pools, SQLite connections
served by a worker) belong to the event loop that opened them. A framework
adapter may be called from that loop, from another loop, or from plain
synchronous code (LangGraph's ``graph.invoke``). ``LoopBridge`` sends every
call to the store's *home* loop:

* the caller's loop is the home loop: the coroutine is awaited directly;
* another loop: it is scheduled on the home loop and awaited through a future;
* synchronous code: it is scheduled on the home loop and the thread blocks on
  the result. Blocking the home loop's own thread would deadlock, so that case
  raises and says to use the async method.

With no home loop given (or ``private=True``), the bridge starts a private loop
in a daemon thread (the reverse of LangGraph's ``AsyncPostgresSaver``, which
runs sync methods from a thread against an async connection).

``inline=True`` is for stores that belong to no loop (SQLite served inline,
memory) and that the adapter alone uses: a call (sync, or async from any loop)
then runs the coroutine in the caller's own thread, with no thread hop (on a busy machine a
hop costs a scheduler wake-up per call, often more than the work itself). Such
a coroutine never suspends unless it must wait (a locked SQLite file, a
conflict backoff); then it is abandoned before anything was committed and run
again on the private loop, so ``run_sync(..., rerun_safe=False)`` opts out for
calls that commit more than once. Every call of an inline bridge, inline or on
the private loop, holds one lock, so the store sees one call at a time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from ..core.errors import InvalidRequest

T = TypeVar("T")

_SYNC_IN_LOOP = (
    "a synchronous tether adapter method was called from the thread running the store's "
    "event loop, which would block that loop forever. Inside async code use the async "
    "methods (aget_tuple, aput, alist...), or call the sync methods from another thread."
)


class LoopBridge:
    """Sends coroutines to one home event loop, from async or sync callers."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        private: bool = False,
        inline: bool = False,
    ) -> None:
        if loop is None and not (private or inline):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
        self._loop = loop
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.inline = inline
        self._mutex = threading.Lock()  # inline bridges: one store call at a time

    @property
    def owns_loop(self) -> bool:
        """True when the bridge runs its own private loop thread."""
        return self._thread is not None

    def _home(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or (self._thread is not None and self._loop.is_closed()):
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=run, name="tether-adapter-loop", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def _on_home(self, loop: asyncio.AbstractEventLoop) -> bool:
        try:
            return asyncio.get_running_loop() is loop
        except RuntimeError:
            return False

    def _guarded(self, make: Callable[[], Coroutine[Any, Any, T]]) -> Coroutine[Any, Any, T]:
        """``make()``, holding the inline bridge's lock while it runs (on the home loop)."""
        if not self.inline:
            return make()

        async def locked() -> T:
            with self._mutex:
                return await make()

        return locked()

    async def run(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Await ``make()`` on the home loop, from any loop (inline bridges: in place)."""
        if self.inline:
            with self._mutex:
                done, value = _drive(make())
            if done:
                return value  # type: ignore[no-any-return]
        loop = self._home()
        if self._on_home(loop):
            return await self._guarded(make)
        return await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(self._guarded(make), loop)
        )

    def run_sync(self, make: Callable[[], Coroutine[Any, Any, T]], *, rerun_safe: bool = True) -> T:
        """Run ``make()`` and block until it is done: inline when the bridge allows it
        and the thread runs no loop, else on the home loop."""
        if self.inline and rerun_safe:
            with self._mutex:
                done, value = _drive(make())
            if done:
                return value  # type: ignore[no-any-return]
        loop = self._home()
        if self._on_home(loop):
            raise InvalidRequest(_SYNC_IN_LOOP)
        return asyncio.run_coroutine_threadsafe(self._guarded(make), loop).result()

    async def iterate(self, agen: AsyncIterator[T]) -> AsyncIterator[T]:
        """Iterate an async generator that must run on the home loop, from any loop."""
        loop = self._home()
        if self._on_home(loop):
            async for item in agen:
                yield item
            return
        try:
            while True:
                more, item = await asyncio.wrap_future(
                    asyncio.run_coroutine_threadsafe(self._guarded(lambda: _anext(agen)), loop)
                )
                if not more:
                    return
                yield item
        finally:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_aclose(agen), loop))

    def iterate_sync(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """Iterate an async generator on the home loop from synchronous code."""
        loop = self._home()
        if self._on_home(loop):
            raise InvalidRequest(_SYNC_IN_LOOP)
        try:
            while True:
                fut: concurrent.futures.Future[tuple[bool, Any]] = asyncio.run_coroutine_threadsafe(
                    self._guarded(lambda: _anext(agen)), loop
                )
                more, item = fut.result()
                if not more:
                    return
                yield item
        finally:
            asyncio.run_coroutine_threadsafe(_aclose(agen), loop).result()

    def stop(self) -> None:
        """Stop and close the private loop, if the bridge started one (from any thread,
        including one that runs a loop of its own)."""
        with self._lock:
            thread, loop = self._thread, self._loop
            if thread is None or loop is None:
                return
            self._thread = None
            self._loop = None
        if threading.current_thread() is thread:
            raise InvalidRequest("a tether adapter cannot be closed from its own loop thread")
        # Finish async generators on the loop's own thread: run_until_complete here
        # would fail in a thread that already runs a loop.
        asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


class ScopeLocks:
    """One ``asyncio.Lock`` per scope, held while an adapter writes that scope, kept
    only while someone holds or waits for it.

    An adapter's own concurrent writes to one scope (LangGraph runs a step's tasks
    concurrently, each task's ``aput_writes`` on its own) would otherwise race
    each other on a pooled store (PostgreSQL, Redis), each losing the head check to
    the others until its retries run out; queued here, they commit one after the
    other, and ``Conflict`` is left to writers outside this process. Uncontended,
    ``hold`` takes the lock without waiting, so an inline bridge (``_drive``, no
    event loop) never suspends on it: its calls are serialised by its mutex first.
    """

    def __init__(self) -> None:
        self._locks: dict[str, list[Any]] = {}  # scope -> [lock, holders and waiters]

    def hold(self, scope: str) -> _Held:
        """``async with locks.hold(scope):`` the scope's writes, one at a time (a plain
        async context manager: a generator-based one costs more than the lock)."""
        return _Held(self._locks, scope)

    def __len__(self) -> int:
        return len(self._locks)


class _Held:
    """One ``ScopeLocks.hold``: the scope's lock taken on entry, released on exit; the
    entry leaves the map with its last holder or waiter."""

    __slots__ = ("_entry", "_locks", "_scope")

    def __init__(self, locks: dict[str, list[Any]], scope: str) -> None:
        self._locks, self._scope = locks, scope
        self._entry: list[Any] | None = None

    async def __aenter__(self) -> None:
        entry = self._locks.get(self._scope)
        if entry is None:
            entry = self._locks[self._scope] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            await entry[0].acquire()
        except BaseException:
            self._leave(entry)
            raise
        self._entry = entry

    async def __aexit__(self, *exc: object) -> None:
        entry = self._entry
        assert entry is not None
        self._entry = None
        entry[0].release()
        self._leave(entry)

    def _leave(self, entry: list[Any]) -> None:
        entry[1] -= 1
        if entry[1] == 0:
            del self._locks[self._scope]


def _drive(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """Run a coroutine to its end in this thread, without awaiting anything: (True,
    result) if it finished without suspending, (False, None) if it had to wait (it
    was closed at that point, before committing anything, and must be run again on
    the home loop). In a thread that runs a loop, a wait it started there (a timer)
    finishes later with nobody waiting on it."""
    try:
        coro.send(None)
    except StopIteration as e:
        return True, e.value
    except RuntimeError as e:
        if "no running event loop" not in str(e):
            raise
        return False, None
    coro.close()
    return False, None


async def _anext(agen: AsyncIterator[T]) -> tuple[bool, Any]:
    # StopAsyncIteration must not cross the thread boundary as an exception of a
    # coroutine, so the end of the iteration travels as a flag.
    try:
        return True, await agen.__anext__()
    except StopAsyncIteration:
        return False, None


async def _aclose(agen: AsyncIterator[Any]) -> None:
    close: Callable[[], Awaitable[None]] | None = getattr(agen, "aclose", None)
    if close is not None:
        await close()
