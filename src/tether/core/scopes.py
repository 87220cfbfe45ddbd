"""Scope names (SPEC §2). A scope is one causal graph inside a namespace.

``app`` is the whole deployment, ``user:<id>`` one user across threads,
``thread:<id>`` one conversation. A run lives inside its thread's graph (its
nodes carry the run id); the call scope (``context``) is never persisted.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from .errors import InvalidRequest

APP = "app"
SCOPE_KINDS = ("app", "user", "thread", "run", "call")


def thread(thread_id: str) -> str:
    return "thread:" + _id("thread", thread_id)


def user(user_id: str) -> str:
    return "user:" + _id("user", user_id)


def parse(scope: str) -> tuple[str, str | None]:
    """``"thread:t1"`` -> ``("thread", "t1")``; ``"app"`` -> ``("app", None)``."""
    if scope == APP:
        return APP, None
    kind, sep, ident = scope.partition(":")
    if not sep or kind not in ("user", "thread") or not ident:
        raise InvalidRequest(f"unknown scope {scope!r}: use app, user:<id> or thread:<id>")
    return kind, ident


_ASCII_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
# Control (Cc), format (Cf: zero-width and bidirectional marks such as U+202E),
# surrogate (Cs) and line/paragraph separators (Zl, Zp): invisible or able to reorder
# or break what a person reads in a log, a terminal or the inspector.
_HIDDEN: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def printable(value: str) -> bool:
    """True if ``value`` holds no control, format, bidirectional or separator character.

    The one rule for every name and id tether stores or shows (namespaces, scopes,
    thread and user ids): a name reads the same wherever it is printed."""
    if value.isascii():
        return _ASCII_CONTROL.search(value) is None
    category = unicodedata.category
    return not any(category(c) in _HIDDEN for c in value)


def _id(what: str, value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > 200 or not printable(value):
        raise InvalidRequest(
            f"{what} id must be 1-200 printable characters (no control, format or "
            f"bidirectional characters), got {value!r}",
            field=what,
        )
    return value
