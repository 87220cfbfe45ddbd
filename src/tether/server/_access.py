"""Access per user: what a token bound to one user (``Token.user``) may touch.

Such a token reads and writes only its user's scope (``user:<id>``) and the threads
that user owns. A thread's owner is recorded by its first turn: the ``user`` of the
first goal that starts a run (``metadata.user``, which the runtime writes on every
goal), so ownership needs no node of its own and moves with an export, an import or a
fork. A thread with no such goal has no owner: only a token bound to no user (an
admin's, a service's) may touch it, except that a user's step may start an *empty*
thread, which its first turn makes theirs.

Everything else is refused with ``Forbidden`` (HTTP 403) before anything is written:
``app``, another user's scope or thread, a namespace-wide operation, an import into a
thread (it would write a thread nobody owns) and metrics (they sum every namespace).
The listings (threads, runs) show only the user's own threads.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from ..control.owners import thread_owner
from ..core import scopes
from ..store.base import Store
from .auth import Forbidden, Token

__all__ = ["Owners", "refuse_thread_import", "require_scope", "thread_owner"]


class _HasToken(Protocol):
    @property
    def token(self) -> Token | None: ...


class Owners:
    """Thread owners looked up once per request (a listing asks about many threads)."""

    def __init__(self, store: Store, namespace: str, *, bound: int = 1024) -> None:
        self.store, self.namespace, self._bound = store, namespace, bound
        self._seen: OrderedDict[str, str | None] = OrderedDict()

    async def of(self, thread: str) -> str | None:
        if thread not in self._seen:
            self._seen[thread] = await thread_owner(self.store, self.namespace, thread)
            while len(self._seen) > self._bound:
                self._seen.popitem(last=False)
        return self._seen[thread]


def _refuse(token: Token, what: str) -> Forbidden:
    return Forbidden(
        f"token {token.name!r} is bound to user {token.user!r} and may not touch {what}; "
        "use a token bound to no user (an admin's) for it",
        user=token.user,
    )


async def require_scope(
    token: Token,
    store: Store,
    namespace: str,
    scope: str | None,
    *,
    start: bool = False,
) -> None:
    """Raise ``Forbidden`` unless ``token`` may touch ``scope`` (None: the whole namespace).

    ``start``: the caller starts a turn, which may make an empty thread the user's.
    Tokens bound to no user may touch everything their grants allow.
    """
    if token.user is None:
        return
    if scope is None:
        raise _refuse(token, f"the whole namespace {namespace!r}")
    kind, ident = scopes.parse(scope)
    if kind == "user":
        if ident != token.user:
            raise _refuse(token, f"another user's scope {scope!r}")
        return
    if kind != "thread" or ident is None:
        raise _refuse(token, f"the scope {scope!r}")
    owner = await thread_owner(store, namespace, ident)
    if owner == token.user:
        return
    if owner is None and start and (await store.head(namespace, scope)).sequence == 0:
        return
    raise _refuse(token, f"thread {ident!r}: it is not the user's own")


def refuse_thread_import(at: _HasToken) -> None:
    """A token bound to a user imports into its user scope only: a snapshot written as a
    thread names no owner the server can trust (its goals say whatever they say)."""
    token = at.token
    if token is not None and token.user is not None:
        raise _refuse(token, "an import into a thread (it would write a thread nobody owns)")
