"""How the memory views show payloads whose data key was destroyed (``tether.crypto``).

Outside ``tether.crypto.erased_placeholders()`` (the default) an erased payload
raises ``KeyErased`` at the store and no view sees it. Inside, the store hands
over ``{"$erased": true}`` and each view shows it as what it is: a value, an entry
or a memory content reads as that placeholder (``is_erased`` tests it), a message
reads as ``ERASED_TEXT``; a view never takes it for real data (a variable's value,
a run id, a tool call). docs/encryption.md ("Erased data in views") has the table.
"""

from __future__ import annotations

from typing import Any, Final

from ..crypto._keyring import ERASED_PLACEHOLDER_KEY, is_erased

__all__ = ["ERASED_TEXT", "is_erased", "placeholder"]

ERASED_TEXT: Final = "[erased]"


def placeholder() -> dict[str, Any]:
    """A fresh ``{"$erased": true}`` (callers may mutate what a view returns)."""
    return {ERASED_PLACEHOLDER_KEY: True}
