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


_COPY_TO_EDIT = (
    "copy it to edit: dict(message) (copy.deepcopy(message) for its tool calls and "
    "arguments too), list(messages)"
)


def _refuse_message(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise TypeError(
        f"a {type(self).__name__} is read-only (the conversation a process keeps shares "
        f"it with later views and requests): {_COPY_TO_EDIT}"
    )


class ReadOnlyDict(dict[str, Any]):
    """A message of a conversation view or a model request, or a dict inside one (a tool
    call, its arguments): a dict that refuses to be changed (``TypeError``).

    A process keeps a long thread's conversation between turns and hands the same
    message objects to every later view (``load_conversation``, ``conversation_view``)
    and model request, so a message changed in place would change what they see. Made
    once, when the message is first projected. Everything that reads a dict works
    (indexing, ``get``, iteration, ``==`` with plain dicts, ``json.dumps``, ``orjson``,
    the same bytes as a plain dict); ``dict(m)``, ``m.copy()`` and ``{**m}`` give a
    plain dict to edit (its tool calls still read-only: ``copy.deepcopy(m)`` copies
    them too). Pickled or deep-copied, it is a plain dict all the way down.
    """

    __slots__ = ()

    __setitem__ = __delitem__ = _refuse_message
    update = pop = popitem = clear = setdefault = __ior__ = _refuse_message

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        import copy

        return copy.deepcopy(dict(self), memo)


class ReadOnlyList(list[Any]):
    """A list inside a read-only message (its ``tool_calls``, a JSON array in a call's
    arguments): it refuses to be changed (``TypeError``), as ``ReadOnlyDict``. Slicing
    and ``+`` give a plain list, ``list(x)`` a copy to edit; pickled or deep-copied, it
    is a plain list all the way down."""

    __slots__ = ()

    append = extend = insert = pop = remove = clear = sort = reverse = _refuse_message
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse_message

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        import copy

        return copy.deepcopy(list(self), memo)


_SCALARS = (str, int, float, bool, type(None))


def freeze(value: Any) -> Any:
    """``value`` with every dict and list in it read-only (``ReadOnlyDict``,
    ``ReadOnlyList``, copied once; tuples stay tuples of frozen items); those already
    read-only, and scalars, are returned as they are."""
    t = type(value)
    if t is ReadOnlyDict or t is ReadOnlyList or t in _SCALARS:
        return value
    if isinstance(value, dict):
        return ReadOnlyDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return ReadOnlyList([freeze(v) for v in value])
    if isinstance(value, tuple):
        return tuple(freeze(v) for v in value)
    return value


class MessageList(ReadOnlyList):
    """The messages of a ``ModelRequest`` the runtime makes: a list that refuses to be
    changed (``TypeError``), as a model reads a request and never edits it; its
    messages are ``ReadOnlyDict`` (with their tool calls and arguments read-only too).

    A process keeps a long thread's conversation between turns and hands the same list
    to the next turn's request when nothing else holds it, extended by the new
    messages, instead of copying it each turn; so a change made to it in place would
    reach later views. Everything that reads a list works (iteration, indexing,
    ``len``, ``json.dumps``, ``orjson``); slicing and ``+`` give a plain list, and
    ``list(messages)`` a copy to edit (``copy.deepcopy(messages)`` to edit the
    messages too). Pickled or deep-copied, it is a plain list of plain dicts.
    """

    __slots__ = ()


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
    objects (``ReadOnlyDict``, which refuse changes), and when nothing else holds it the
    same list (a ``MessageList``, which refuses changes too), to the next request. Copy
    a message before editing it.
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
