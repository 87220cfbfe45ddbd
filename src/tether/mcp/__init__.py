"""tether as an MCP memory server (``tether mcp``; the ``mcp`` extra for the server).

``KnowledgeGraph`` is the reference memory server's knowledge graph on a tether scope
(no MCP SDK needed); ``load_memory_file`` reads that server's ``memory.jsonl``. The
server itself (``tether.mcp.server``) and its tools (``tether.mcp.tools``) are started
by ``tether --store URL mcp``; see docs/mcp.md.
"""

from __future__ import annotations

from .graph import EntityNotFound, KnowledgeGraph, load_memory_file

__all__ = ["EntityNotFound", "KnowledgeGraph", "load_memory_file"]
