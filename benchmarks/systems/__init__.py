"""One module per benchmarked system; each exposes ``SYSTEM``, a ``base.System`` subclass.

The registry below lets the driver (run.py, on tether's interpreter) know each system's
label and interpreter without importing the peer libraries.
"""

from __future__ import annotations

from typing import NamedTuple


class Entry(NamedTuple):
    label: str
    venv: str  # "tether": tether's .venv; "peers": benchmarks/.venv-peers


REGISTRY: dict[str, Entry] = {
    "sqlite_floor": Entry("sqlite3 loop (floor)", "tether"),
    "tether_sqlite": Entry("tether (SQLite)", "tether"),
    "tether_postgres": Entry("tether (PostgreSQL)", "tether"),
    "tether_redis": Entry("tether (Redis)", "tether"),
    "langgraph_sqlite": Entry("LangGraph SqliteSaver", "peers"),
    "langgraph_postgres": Entry("LangGraph PostgresSaver", "peers"),
    "openai_sqlite": Entry("OpenAI Agents SQLiteSession", "peers"),
    "adk_sqlite": Entry("Google ADK DatabaseSessionService (SQLite)", "peers"),
}

ALL = list(REGISTRY)
