"""The agent `server_rss.py` serves: a ScriptedModel with one rule, the whole buffer.

tether --store bench.db serve --agent server_rss_agent:agent   # benchmarks/ on PYTHONPATH
"""

from __future__ import annotations

import tether
from tether.models import Rule

ANSWER = ("It is sunny in Paris. " * 10)[:200]  # agent_turn.py's answer


def agent(store: tether.Store, namespace: str) -> tether.Agent:
    # ScriptedModel keeps its last 8 requests (its default): as a demo server would.
    return tether.Agent(
        None,
        tether.ScriptedModel([Rule(match=None, answer=ANSWER)]),
        store=store,
        namespace=namespace,
    )
