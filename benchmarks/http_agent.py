"""The agent `http_service.py` serves: the demo model's rules, the whole buffer, no tools.

    tether --store bench.db serve --agent http_agent:agent   # with benchmarks/ on PYTHONPATH

The same factory builds the in-process agent the HTTP step is compared with.
"""

from __future__ import annotations

import tether


def agent(store: tether.Store, namespace: str) -> tether.Agent:
    return tether.Agent(None, tether.ScriptedModel.demo(), store=store, namespace=namespace)
