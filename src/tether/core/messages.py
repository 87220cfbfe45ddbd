"""Provider-neutral model messages, requests and responses.

A message is a plain dict so that it can be stored in the graph, exported and
sent to any provider without conversion layers:

    {"role": "system" | "user" | "assistant" | "tool",
     "content": str | None,
     "tool_calls": [{"id": str, "name": str, "arguments": dict}],   # assistant only
     "tool_call_id": str, "name": str}                              # tool only
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]


class MessageList(list[Message]):
    """The messages of a ``ModelRequest`` the runtime makes: a list that refuses to be
    changed (``TypeError``), as a model reads a request and never edits it.

    A process keeps a long thread's conversation between turns and hands the same list
    to the next turn's request when nothing else holds it, extended by the new
    messages, instead of copying it each turn; so a change made to it in place would
    reach later views. Everything that reads a list works (iteration, indexing,
    ``len``, ``json.dumps``, ``orjson``); slicing and ``+`` give a plain list, and
    ``list(messages)`` a copy to edit. Pickled or copied, it is a plain list.
    """

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "a model request's messages are read-only (later turns share them): "
            "copy them to edit, e.g. messages = list(request.messages)"
        )

    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))

    def __copy__(self) -> list[Message]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Message]:
        import copy

        return copy.deepcopy(list(self), memo)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: a name, a description and a JSON schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """One call the model asks for. ``id`` is the provider's call id."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryWrite:
    """A semantic memory the model keeps in the same response (SPEC §4)."""

    type: str
    key: str
    content: Any


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRequest:
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    # Current semantic memory visible to the model: {"<type>:<key>": content}.
    memory: dict[str, Any] = field(default_factory=dict)
    # The caller's context for this call. Never persisted.
    context: dict[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelResponse:
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    memories: list[MemoryWrite] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)


@runtime_checkable
class Model(Protocol):
    """Anything that turns a request into a response.

    A request's messages are read, never changed in place: the conversation a process
    keeps between turns (``tether.projections.view_cache``) hands the same message
    objects, and when nothing else holds it the same list (a ``MessageList``, which
    refuses changes), to the next request. Copy a message before editing it.
    """

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of ``dim`` floats, one per text, in order.

    ``name`` names the embedding space: two embedders with one name give the same
    vector for the same text, so an index built by one serves the other.
    Implementations: ``tether.models.embeddings``.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...
