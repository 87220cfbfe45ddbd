"""The erasure marker: how views show payloads whose data key was destroyed.

Cross-cutting (the cipher sets it, every view reads it), so it lives in the core and
nothing below ``tether.crypto`` imports the cipher.

Outside ``tether.crypto.erased_placeholders()`` (the default) an erased payload
raises ``KeyErased`` at the store and no view sees it. Inside, the store hands
over ``{"$erased": true}`` and each view shows it as what it is: a value, an entry
or a memory content reads as that placeholder (``is_erased`` tests it), a message
reads as ``ERASED_TEXT``; a view never takes it for real data (a variable's value,
a run id, a tool call). docs/encryption.md ("Erased data in views") has the table.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, Final

__all__ = [
    "ERASED_PLACEHOLDER_KEY",
    "ERASED_TEXT",
    "erased_placeholders",
    "is_erased",
    "placeholder",
    "placeholders_mode",
]

ERASED_PLACEHOLDER_KEY: Final = "$erased"

# Set by ``erased_placeholders()``: views read erased payloads as a placeholder.
_placeholders: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "tether_erased_placeholders", default=None
)


@contextlib.contextmanager
def erased_placeholders(enabled: bool = True) -> Iterator[None]:
    """Within this block, an erased payload reads as ``{"$erased": true}`` instead of raising.

    For views (conversation, inspector) that must show what remains of a graph;
    exports and verification should leave it off, so they fail loudly instead.
    """
    token = _placeholders.set(enabled)
    try:
        yield
    finally:
        _placeholders.reset(token)


def placeholders_mode() -> bool | None:
    """What the innermost ``erased_placeholders()`` block asked for (None: none open)."""
    return _placeholders.get()


def is_erased(payload: Any) -> bool:
    """Whether a payload read under ``erased_placeholders()`` is the erased placeholder."""
    return isinstance(payload, dict) and payload.get(ERASED_PLACEHOLDER_KEY) is True


ERASED_TEXT: Final = "[erased]"


def placeholder() -> dict[str, Any]:
    """A fresh ``{"$erased": true}`` (callers may mutate what a view returns)."""
    return {ERASED_PLACEHOLDER_KEY: True}
