"""Shared LangGraph pieces: the graph every LangGraph system compiles.

State is ``messages: Annotated[list, add_messages]`` (the documented chat pattern, a
BinaryOperatorAggregate channel: every checkpoint holds the whole list). Each turn is
one ``invoke`` with the user message; the single node ``assistant`` appends the
assistant message. ``durability="sync"`` makes LangGraph write each checkpoint before
``invoke`` returns (its default, "async", may return before the last write lands).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages


class ChatState(TypedDict):
    messages: Annotated[list, add_messages]
    reply: str


def _append(state: list[Any], writes: Sequence[Any]) -> list[Any]:
    return list(add_messages(state, [m for w in writes for m in w]))


def delta_state() -> type:
    """The same state with its messages in a ``DeltaChannel`` (LangGraph 1.2, default
    snapshot frequency): the O(new messages) way (``benchmarks/langgraph_delta.py``)."""
    from langgraph.channels.delta import DeltaChannel

    # the functional form: its annotations are objects, not strings to resolve later
    return TypedDict(  # type: ignore[operator]
        "DeltaChatState", {"messages": Annotated[list, DeltaChannel(_append)], "reply": str}
    )


def _assistant(state: ChatState) -> dict[str, Any]:
    # The "model" answers with the text the workload prepared for this turn.
    return {"messages": [AIMessage(content=state["reply"])]}


def _reply(state: Any) -> dict[str, Any]:
    # _assistant without its annotation: LangGraph reads a node's state type from it
    return _assistant(state)


def build(checkpointer: Any, state: type = ChatState) -> Any:
    g = StateGraph(state)
    g.add_node("assistant", _assistant if state is ChatState else _reply)
    g.add_edge(START, "assistant")
    return g.compile(checkpointer=checkpointer)


def turn_input(user_msg: str, assistant_msg: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=user_msg)], "reply": assistant_msg}


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def texts(graph: Any, thread: str) -> list[str]:
    snap = graph.get_state(config(thread))
    return [str(m.content) for m in snap.values.get("messages", [])]
