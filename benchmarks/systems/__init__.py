"""One module per benchmarked system; each exposes ``SYSTEM``, a ``base.System`` subclass.

The registry below lets the driver (run.py, on tether's interpreter) know each system's
label and interpreter without importing the peer libraries.
"""

from __future__ import annotations

from typing import NamedTuple


class Entry(NamedTuple):
    label: str
    venv: str  # "tether": tether's .venv; "peers": benchmarks/.venv-peers
    backend: str  # where the data lives: systems are compared with others on the same one


REGISTRY: dict[str, Entry] = {
    "sqlite_floor": Entry("sqlite3 loop (floor)", "tether", "sqlite"),
    "tether_sqlite": Entry("tether (SQLite)", "tether", "sqlite"),
    "tether_postgres": Entry("tether (PostgreSQL)", "tether", "postgres"),
    "tether_redis": Entry("tether (Redis)", "tether", "redis"),
    "langgraph_sqlite": Entry("LangGraph SqliteSaver", "peers", "sqlite"),
    # tether's LangGraph checkpointer, in the peers venv beside SqliteSaver (its pair)
    "langgraph_tether_sqlite": Entry("LangGraph TetherSaver (SQLite)", "peers", "sqlite"),
    "langgraph_postgres": Entry("LangGraph PostgresSaver", "peers", "postgres"),
    # tether's LangGraph checkpointer on the same server, beside PostgresSaver (its pair)
    "langgraph_tether_postgres": Entry("LangGraph TetherSaver (PostgreSQL)", "peers", "postgres"),
    "openai_sqlite": Entry("OpenAI Agents SQLiteSession", "peers", "sqlite"),
    # tether's session for the SDK, in the peers venv beside SQLiteSession (its pair)
    "openai_tether_sqlite": Entry("OpenAI Agents TetherSession (SQLite)", "peers", "sqlite"),
    # the SDK's server sessions, each beside TetherSession on the same server
    "openai_sqlalchemy_postgres": Entry(
        "OpenAI Agents SQLAlchemySession (PostgreSQL)", "peers", "postgres"
    ),
    "openai_tether_postgres": Entry("OpenAI Agents TetherSession (PostgreSQL)", "peers", "postgres"),
    "openai_redis": Entry("OpenAI Agents RedisSession", "peers", "redis"),
    "openai_tether_redis": Entry("OpenAI Agents TetherSession (Redis)", "peers", "redis"),
    "adk_sqlite": Entry("Google ADK DatabaseSessionService (SQLite)", "peers", "sqlite"),
    # tether's ADK session service, in the peers venv beside DatabaseSessionService
    "adk_tether_sqlite": Entry("Google ADK TetherSessionService (SQLite)", "peers", "sqlite"),
}

ALL = list(REGISTRY)
