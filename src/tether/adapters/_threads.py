"""A framework's own id (a session, a conversation, a run) as a tether thread scope.

Frameworks take any string as an id; a scope name holds 1-200 printable characters.
``thread_scope`` keeps ``thread:<id>`` for every id a scope name can hold and maps any
other string (the empty one, one over 200 characters, one with control characters) to
``thread:%`` + its SHA-256, padded with ``%`` past 200 characters, so that no id of
the first kind names the same thread. Used by the OpenAI Agents session and the
Pydantic AI stores.
"""

from __future__ import annotations

import hashlib
from typing import Final

from ..core import scopes
from ..core.errors import InvalidRequest

_ID_MAX: Final = 200  # the longest id scopes.thread takes


def thread_scope(thread_id: str) -> str:
    """``thread:<thread_id>``, or the hashed name of an id no scope name can hold."""
    try:
        return scopes.thread(thread_id)
    except InvalidRequest:
        raw = thread_id.encode("utf-8", "surrogatepass")  # any str, lone surrogates too
        return "thread:%" + hashlib.sha256(raw).hexdigest().ljust(_ID_MAX, "%")
