"""Token counting for the ``tokens`` policy and compaction.

A counter is anything with ``count(text) -> int`` (the ``TokenCounter`` protocol).
``default_counter()`` uses tiktoken's ``o200k_base`` encoding when tiktoken is
installed and selected (see ``default_counter``: tether never lets tiktoken fetch
its encoding from the network on its own); otherwise ``EstimateCounter``, a
documented estimate that needs nothing:

    tokens(text) = ceil(ASCII characters / 4) + non-ASCII characters

Four ASCII characters per token is OpenAI's rule of thumb for English; counting
every non-ASCII character as a whole token keeps CJK and other scripts from being
badly underestimated (it overestimates accented Latin text, which errs on the
safe side for a budget). ``TiktokenCounter()`` can always be passed explicitly.

A message costs its content plus ``MESSAGE_OVERHEAD`` tokens (role and framing,
as in OpenAI's cookbook), plus the name and JSON arguments of each tool call.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

import orjson

from ..core.messages import Message

__all__ = [
    "MESSAGE_OVERHEAD",
    "EstimateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "default_counter",
    "message_tokens",
    "messages_tokens",
]

MESSAGE_OVERHEAD = 4


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a piece of text."""

    def count(self, text: str) -> int: ...


class EstimateCounter:
    """``ceil(ASCII characters / 4) + non-ASCII characters``: no dependencies, deterministic."""

    name = "estimate"

    def count(self, text: str) -> int:
        if not text:
            return 0
        if text.isascii():
            return math.ceil(len(text) / 4)
        ascii_chars = len(text.encode("ascii", "ignore"))  # counted in C, not per character
        return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)

    def __repr__(self) -> str:
        return "EstimateCounter()"


class TiktokenCounter:
    """Exact counts with a tiktoken encoding (``pip install tether[tokens]``)."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        import tiktoken

        self._enc = tiktoken.get_encoding(encoding)
        self.name = f"tiktoken:{encoding}"

    def count(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=())) if text else 0

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name.split(':', 1)[1]!r})"


TIKTOKEN_LOAD_TIMEOUT = 10.0


@functools.cache
def default_counter() -> TokenCounter:
    """The counter used when none is given (decided once per process).

    tiktoken needs its encoding file, which it downloads on first use. A state
    library must not reach the network behind its user's back (nor stall on a
    machine without one), so tiktoken is used only when asked for:
    ``TETHER_TOKEN_COUNTER=tiktoken`` (or ``tiktoken:<encoding>``), or when
    ``TIKTOKEN_CACHE_DIR`` points at a prepared offline cache. Otherwise, and if
    loading fails or takes over ``TIKTOKEN_LOAD_TIMEOUT`` seconds, the estimate.
    """
    choice = os.environ.get("TETHER_TOKEN_COUNTER", "")
    wanted = choice.startswith("tiktoken") or (
        choice != "estimate" and bool(os.environ.get("TIKTOKEN_CACHE_DIR"))
    )
    if not wanted:
        return EstimateCounter()
    encoding = choice.partition(":")[2] if choice.startswith("tiktoken:") else "o200k_base"
    found: list[TokenCounter] = []

    def load() -> None:
        # Not installed, or the encoding cannot be loaded: keep the estimate.
        with contextlib.suppress(Exception):
            found.append(TiktokenCounter(encoding))

    worker = threading.Thread(target=load, name="tether-tiktoken", daemon=True)
    worker.start()
    worker.join(TIKTOKEN_LOAD_TIMEOUT)
    return found[0] if found else EstimateCounter()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def message_tokens(message: Message, counter: TokenCounter | None = None) -> int:
    """Tokens one message costs: overhead + content + name + tool calls."""
    c = counter or default_counter()
    n = MESSAGE_OVERHEAD + c.count(_text(message.get("content")))
    name = message.get("name")
    if isinstance(name, str):
        n += c.count(name)
    for call in message.get("tool_calls") or ():
        n += 3 + c.count(_text(call.get("name"))) + c.count(_text(call.get("arguments")))
    return n


def messages_tokens(messages: Iterable[Message], counter: TokenCounter | None = None) -> int:
    c = counter or default_counter()
    return sum(message_tokens(m, c) for m in messages)
