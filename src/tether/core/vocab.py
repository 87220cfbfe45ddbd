"""The vocabulary of semantic memory types (SPEC §1, seed 001)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import InvalidNode

TYPE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,47}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeType:
    """A semantic memory type: a bounded lowercase name and what it means."""

    name: str
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TYPE_NAME.fullmatch(self.name):
            raise InvalidNode(
                f"semantic type name {self.name!r} must match {TYPE_NAME.pattern}",
                code="semantic_type",
            )


BUILTIN_NODE_TYPES: tuple[NodeType, ...] = (
    NodeType(name="memory", description="A durable fact or context."),
    NodeType(name="preference", description="A stable user choice or working style."),
    NodeType(name="wisdom", description="A reusable, evidence-supported lesson."),
    NodeType(name="artifact", description="A durable output or a reference to one."),
)

# Types tether itself writes (compaction summaries, the model's own key-value
# memory, tool state). Always accepted, whatever the product's vocabulary.
RESERVED_NODE_TYPES: tuple[NodeType, ...] = (
    NodeType(name="summary", description="Stands for a range of compacted messages."),
    NodeType(name="agent_memory", description="The model's own key-value memory."),
    NodeType(name="tool_state", description="A tool's own durable state."),
)


class Vocabulary:
    """Which semantic types may be written.

    ``Vocabulary()`` is the built-ins. A product passes its own ``types``; unknown
    types are rejected unless ``allow_dynamic`` is set, and then only names that
    match ``^[a-z][a-z0-9_-]{0,47}$``.
    """

    __slots__ = ("_types", "allow_dynamic")

    def __init__(
        self, types: Iterable[NodeType | str] | None = None, *, allow_dynamic: bool = False
    ) -> None:
        chosen = BUILTIN_NODE_TYPES if types is None else tuple(types)
        self._types: dict[str, NodeType] = {}
        for t in (*chosen, *RESERVED_NODE_TYPES):
            nt = t if isinstance(t, NodeType) else NodeType(name=t)
            self._types.setdefault(nt.name, nt)
        self.allow_dynamic = allow_dynamic

    @property
    def types(self) -> tuple[NodeType, ...]:
        reserved = {t.name for t in RESERVED_NODE_TYPES}
        return tuple(t for t in self._types.values() if t.name not in reserved)

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def check(self, name: object) -> str:
        """Return ``name`` if it may be written, else raise InvalidNode(code="semantic_type")."""
        if not isinstance(name, str) or not TYPE_NAME.fullmatch(name):
            raise InvalidNode(
                f"semantic type {name!r} must be a bounded lowercase name ({TYPE_NAME.pattern})",
                code="semantic_type",
            )
        if name in self._types or self.allow_dynamic:
            return name
        known = ", ".join(sorted(self._types))
        raise InvalidNode(
            f"unknown semantic type {name!r} (known: {known}); configure it or allow dynamic types",
            code="semantic_type",
        )


DEFAULT_VOCABULARY = Vocabulary()
