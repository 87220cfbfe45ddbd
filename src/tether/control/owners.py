"""A thread's owner: the user of its first run (``metadata.user`` of its first goal).

The runtime writes ``metadata.user`` on every goal, so a thread's first turn records
who owns it without a node of its own, and ownership moves with an export, an import
or a fork. A thread with no goal that starts a run has no owner. Used by the HTTP
server's tokens bound to a user (``tether.server._access``) and by a step that must
not write into another user's thread (``Agent.step(owner=...)``).
"""

from __future__ import annotations

from typing import Final

from ..core import scopes
from ..core.erased import erased_placeholders
from ..projections.runs import is_run_goal
from ..store.base import Store

__all__ = ["thread_owner"]

_FIRST_PAGE: Final = 16
_PAGE: Final = 512


async def thread_owner(store: Store, namespace: str, thread: str) -> str | None:
    """The user who owns ``thread``: the user of its first run (None: no owner)."""
    scope = scopes.thread(thread)
    after, limit = 0, _FIRST_PAGE
    while True:
        # An erased goal reads as a placeholder: no owner can be told from it.
        with erased_placeholders():
            page = await store.nodes(namespace, scope, after=after, limit=limit)
        for n in page:
            if is_run_goal(n):
                meta = n.payload.get("metadata")
                user = meta.get("user") if isinstance(meta, dict) else None
                return user if isinstance(user, str) else None
        if len(page) < limit:
            return None
        after, limit = page[-1].sequence, _PAGE
