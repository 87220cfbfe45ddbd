"""The core: what every other layer builds on, importing nothing outside it.

One concept per module, each imported by its full name (``from tether.core.graph
import CausalNode``); this package imports none of them, so loading one loads only
what it needs:

* ``graph``: nodes, identity, frontier, ``AgentState`` (SPEC §1);
* ``canonical``: canonical JSON, the bytes a node id hashes;
* ``validate``: payload checks at the doors;
* ``vocab``: node types and the vocabulary of semantic memory;
* ``scopes``: scope names (``app``, ``user:<id>``, ``thread:<id>``...);
* ``messages``: the model protocol's types (``Model``, ``ModelRequest``...);
* ``erased``: the erasure marker and ``erased_placeholders``;
* ``errors``: ``TetherError`` and the errors every layer shares;
* ``telemetry``: OpenTelemetry spans and metrics, off unless an SDK is configured.

docs/architecture.md has the layers above it.
"""

from __future__ import annotations

__all__ = [
    "canonical",
    "erased",
    "errors",
    "graph",
    "messages",
    "scopes",
    "telemetry",
    "validate",
    "vocab",
]
