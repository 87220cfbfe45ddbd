"""Shared LangGraph pieces: the graph every LangGraph system compiles.

State is ``messages: Annotated[list, add_messages]`` (the documented chat pattern, a
BinaryOperatorAggregate channel: every checkpoint holds the whole list). Each turn is
one ``invoke`` with the user message; the single node ``assistant`` appends the
assistant message. ``durability="sync"`` makes LangGraph write each checkpoint before
``invoke`` returns (its default, "async", may return before the last write lands).
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages


class ChatState(TypedDict):
    messages: Annotated[list, add_messages]
    reply: str


def _assistant(state: ChatState) -> dict[str, Any]:
    # The "model" answers with the text the workload prepared for this turn.
    return {"messages": [AIMessage(content=state["reply"])]}


def build(checkpointer: Any) -> Any:
    g = StateGraph(ChatState)
    g.add_node("assistant", _assistant)
    g.add_edge(START, "assistant")
    return g.compile(checkpointer=checkpointer)


def turn_input(user_msg: str, assistant_msg: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=user_msg)], "reply": assistant_msg}


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def texts(graph: Any, thread: str) -> list[str]:
    snap = graph.get_state(config(thread))
    return [str(m.content) for m in snap.values.get("messages", [])]
