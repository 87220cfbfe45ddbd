"""Conversation policies (SPEC §3, seeds 002 and 004) and their pure selection rules.

=========  ===================================================================
policy     what the view holds (the system prompt is always kept)
=========  ===================================================================
buffer     every message
window     the last ``size`` messages (default 10)
summary    every message until there are more than ``threshold`` (20); then the
           older ones are compressed into a summary by a model and the latest
           ``keep`` (6) stay verbatim; the summary asks for ``max_tokens`` (512)
tokens     the longest recent suffix within ``max_tokens`` (4000) counting the
           system messages, but at least ``preserve_recent`` (6) messages
=========  ===================================================================

Selection works on whole units (an assistant message with its tool results is one
unit, see ``projection``), so a policy never separates a call from its results:

* window: whole units from the newest while they fit in ``size``; a unit straddling
  the cut is dropped, unless it is the newest one, which is then kept whole (the view
  is never empty because one step made many parallel calls).
* tokens: whole units from the newest while the total stays within the budget; then,
  if fewer than ``preserve_recent`` messages were kept, more whole units until there
  are at least that many (this may exceed the budget; the floor wins).

Policies are frozen dataclasses; specs name them in YAML (``{"policy": "window",
"size": 10}``), which ``policy_from_dict`` reads and ``to_dict`` writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

from ..core.errors import InvalidRequest
from ..core.messages import Model
from .projection import Unit
from .tokens import TokenCounter, default_counter, message_tokens

__all__ = [
    "Buffer",
    "Policy",
    "Summary",
    "Tokens",
    "Window",
    "policy_from_dict",
    "select_recent",
    "select_tokens",
    "select_window",
]


def _check_int(name: str, value: Any, minimum: int) -> int:
    if type(value) is not int or value < minimum:
        raise InvalidRequest(f"{name} must be an integer >= {minimum}, got {value!r}", field=name)
    return value


def _fields(data: Mapping[str, Any], allowed: set[str]) -> dict[str, Any]:
    extra = sorted(set(data) - allowed - {"policy"})
    if extra:
        raise InvalidRequest(
            f"unknown field(s) {', '.join(extra)} for policy {data.get('policy')!r}; "
            f"allowed: {', '.join(sorted(allowed)) or 'none'}",
            field=extra[0],
        )
    return {k: data[k] for k in allowed if k in data}


@dataclass(frozen=True, kw_only=True, slots=True)
class Buffer:
    """Every message of the thread (since the latest compaction)."""

    name: ClassVar[str] = "buffer"

    def to_dict(self) -> dict[str, Any]:
        return {"policy": "buffer"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Buffer:
        _fields(data, set())
        return cls()


@dataclass(frozen=True, kw_only=True, slots=True)
class Window:
    """The last ``size`` messages."""

    name: ClassVar[str] = "window"
    size: int = 10

    def __post_init__(self) -> None:
        _check_int("size", self.size, 1)

    def to_dict(self) -> dict[str, Any]:
        return {"policy": "window", "size": self.size}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Window:
        return cls(**_fields(data, {"size"}))


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """Compress past ``threshold`` messages, keeping the latest ``keep`` verbatim.

    ``model`` writes the summary (else the model passed to ``load_conversation``,
    else an extractive summary, see ``compaction``). It is not serialised.
    """

    name: ClassVar[str] = "summary"
    threshold: int = 20
    keep: int = 6
    max_tokens: int = 512
    model: Model | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        _check_int("threshold", self.threshold, 1)
        _check_int("keep", self.keep, 0)
        _check_int("max_tokens", self.max_tokens, 1)
        if self.keep > self.threshold:
            raise InvalidRequest(
                f"keep ({self.keep}) must not exceed threshold ({self.threshold})", field="keep"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": "summary",
            "threshold": self.threshold,
            "keep": self.keep,
            "max_tokens": self.max_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Summary:
        return cls(**_fields(data, {"threshold", "keep", "max_tokens"}))


@dataclass(frozen=True, kw_only=True, slots=True)
class Tokens:
    """The longest recent suffix within ``max_tokens``, at least ``preserve_recent`` messages.

    ``counter`` counts tokens (default: ``tokens.default_counter()``). Not serialised.
    """

    name: ClassVar[str] = "tokens"
    max_tokens: int = 4000
    preserve_recent: int = 6
    counter: TokenCounter | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        _check_int("max_tokens", self.max_tokens, 1)
        _check_int("preserve_recent", self.preserve_recent, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": "tokens",
            "max_tokens": self.max_tokens,
            "preserve_recent": self.preserve_recent,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Tokens:
        return cls(**_fields(data, {"max_tokens", "preserve_recent"}))


Policy: TypeAlias = Buffer | Window | Summary | Tokens

_BY_NAME: dict[str, Callable[[Mapping[str, Any]], Policy]] = {
    "buffer": Buffer.from_dict,
    "window": Window.from_dict,
    "summary": Summary.from_dict,
    "tokens": Tokens.from_dict,
}


def policy_from_dict(data: Mapping[str, Any] | str | None) -> Policy:
    """``{"policy": "window", "size": 10}`` -> ``Window(size=10)``; a bare name works too."""
    if data is None:
        return Buffer()
    if isinstance(data, str):
        data = {"policy": data}
    if not isinstance(data, Mapping):
        raise InvalidRequest(
            f"a memory policy is a mapping like {{'policy': 'window', 'size': 10}}, got {data!r}",
            field="policy",
        )
    name = data.get("policy")
    build = _BY_NAME.get(name) if isinstance(name, str) else None
    if build is None:
        raise InvalidRequest(
            f"unknown memory policy {name!r}; use one of {', '.join(_BY_NAME)}", field="policy"
        )
    return build(data)


# -- selection (pure) ---------------------------------------------------------------


def select_window(units: Sequence[Unit], size: int) -> int:
    """Index of the first unit kept by a window of ``size`` messages."""
    total = 0
    i = len(units)
    while i > 0:
        n = len(units[i - 1].messages)
        if total + n > size:
            if i == len(units):
                i -= 1  # the newest unit alone is larger than the window: keep it whole
            break
        total += n
        i -= 1
    return i


def select_recent(units: Sequence[Unit], minimum: int, start: int | None = None) -> int:
    """Extend a kept suffix starting at ``start`` by whole units to ``minimum`` messages."""
    i = len(units) if start is None else start
    total = sum(len(u.messages) for u in units[i:])
    while i > 0 and total < minimum:
        i -= 1
        total += len(units[i].messages)
    return i


def unit_tokens(unit: Unit, counter: TokenCounter) -> int:
    return sum(message_tokens(m, counter) for m in unit.messages)


def select_tokens(
    units: Sequence[Unit],
    budget: int,
    preserve_recent: int,
    counter: TokenCounter | None = None,
) -> int:
    """Index of the first unit kept: the longest suffix within ``budget`` tokens,
    extended to at least ``preserve_recent`` messages."""
    c = counter or default_counter()
    total = 0
    i = len(units)
    while i > 0:
        t = unit_tokens(units[i - 1], c)
        if total + t > budget:
            break
        total += t
        i -= 1
    return select_recent(units, preserve_recent, i)
