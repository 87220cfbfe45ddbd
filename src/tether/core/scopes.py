"""Scope names (SPEC §2). A scope is one causal graph inside a namespace.

``app`` is the whole deployment, ``user:<id>`` one user across threads,
``thread:<id>`` one conversation. A run lives inside its thread's graph (its
nodes carry the run id); the call scope (``context``) is never persisted.
"""

from __future__ import annotations

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


def _id(what: str, value: object) -> str:
    if (
        not isinstance(value, str)
        or not value
        or len(value) > 200
        or any(ord(c) < 32 for c in value)
    ):
        raise InvalidRequest(f"{what} id must be 1-200 printable characters, got {value!r}")
    return value
