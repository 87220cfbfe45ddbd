"""Where the LangGraph saver keeps things in a thread scope: resource keys, scopes, write rules.

Pure functions, no I/O. ``langgraph.py`` describes the layout as a whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import writes_sort_key

from ..core import scopes
from ..core.errors import InvalidRequest


def enc_ns(ns: str) -> str:
    """The namespace as it appears in resource keys (``;`` ends it; long ones are hashed)."""
    e = ns.replace("%", "%25").replace(";", "%3B")
    if len(e) > 200:
        e = "#" + hashlib.sha256(ns.encode()).hexdigest()[:32]
    return e


def cp_key(e: str) -> str:
    """The namespace's checkpoints: one version per put, the head is the latest."""
    return f"lgc:{e};cp"


def del_key(e: str) -> str:
    """Tombstones: checkpoint nodes hidden by ``delete_for_runs`` and ``prune``."""
    return f"lgc:{e};del"


def odd_key(e: str) -> str:
    """Checkpoint ids whose writes may sit below their newest put in sequence order
    (the id was put again, or written to before it was put): one version per id."""
    return f"lgc:{e};odd"


def id_key(e: str, cid: str) -> str:
    """The pointer that finds a checkpoint by id."""
    return f"lgi:{e};{cid}"


def w_prefix(e: str) -> str:
    return f"lgw:{e};"


def w_key(e: str, cid: str) -> str:
    """The pending writes of one checkpoint: one version per write."""
    return f"{w_prefix(e)}{cid}"


def configurable(config: RunnableConfig) -> dict[str, Any]:
    conf = config.get("configurable") if isinstance(config, dict) else None
    if not isinstance(conf, dict) or "thread_id" not in conf:
        raise InvalidRequest(
            'a LangGraph config needs {"configurable": {"thread_id": ...}}', field="config"
        )
    return conf


def thread_scope(thread_id: Any) -> str:
    return scopes.thread(str(thread_id))


def write_records(stored: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The single writes in payloads of write nodes, in stored order: a ``ws`` node
    holds every write of one ``put_writes`` call (``writes``: idx, channel, value),
    a ``w`` node (as the saver wrote before) one write."""
    out: list[dict[str, Any]] = []
    for p in stored:
        if p.get("lg") == "ws":
            base = {"cp": p["cp"], "task": p["task"], "path": p["path"]}
            out.extend({**base, **w} for w in p["writes"])
        else:
            out.append(p)
    return out


def effective_writes(stored: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """LangGraph's write rules over a checkpoint's writes, oldest first: a regular
    (task, idx) keeps its first write, a special one (error, interrupt...) its last;
    the result is in ``writes_sort_key`` order. ``stored``: write node payloads."""
    by_key: dict[tuple[str, int], dict[str, Any]] = {}
    for w in write_records(stored):
        key = (w["task"], w["idx"])
        if key not in by_key or w["idx"] < 0:
            by_key[key] = w
    return sorted(by_key.values(), key=lambda w: writes_sort_key(w["path"], w["task"], w["idx"]))
