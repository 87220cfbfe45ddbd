"""Drop-in adapters that keep an agent framework and give it tether's state.

Each adapter is its own module and its own extra; importing ``tether`` or this
package never imports a framework:

* ``tether.adapters.langgraph.TetherSaver``: a LangGraph checkpointer
  (``pip install tether[langgraph]``);
* ``tether.adapters.openai_agents.TetherSession``: an OpenAI Agents SDK session
  (``pip install tether[openai-agents]``);
* ``tether.adapters.adk.TetherSessionService``: a Google ADK session service
  (``pip install tether[adk]``).

The stored conversations are ordinary tether threads: the CLI, the inspector,
export, verify and compaction read them. docs/adapters.md maps each framework's
items onto the graph.
"""

from __future__ import annotations

__all__: list[str] = []
