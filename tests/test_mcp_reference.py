"""``tether mcp`` against the reference memory server, side by side.

The setup installs ``@modelcontextprotocol/server-memory`` from npm into a temporary
folder (nothing of it is kept in the repository), starts it and ``tether mcp`` with
the MCP SDK's own client over stdio, runs one script of tool calls against both, and
compares what each call returns: the error flag, the text, the structured content; then
the ``memory://knowledge-graph`` resource as listed and read, and the updates a client
subscribed to it was sent. Then the reference's own memory file is imported into tether (``tether mcp
import-memory``) and read back through tether's server.

Skipped where node or npm is missing (with TETHER_REQUIRE_SERVERS=1, only where node is).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

import mcp_types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning

REFERENCE = "@modelcontextprotocol/server-memory@2026.8.31"
GRAPH = "memory://knowledge-graph"
TETHER = str(Path(sys.executable).with_name("tether"))
REFERENCE_TOOLS = [
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
]


def _e(name: str, type_: str, *obs: str) -> dict[str, Any]:
    return {"name": name, "entityType": type_, "observations": list(obs)}


def _r(a: str, rel: str, b: str) -> dict[str, str]:
    return {"from": a, "to": b, "relationType": rel}


# One conversation's worth of calls, with the corners the reference's code has: a name
# that exists, relations to entities that do not, repeated and known observations, the
# same entity twice in one call, a missing entity (an error, nothing saved), case-folded
# search, deletes of what is not there, cascades, a re-created entity, non-ASCII text,
# quotes, control characters and an empty name.
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("read_graph", {}),
    (
        "create_entities",
        {
            "entities": [
                _e("Ada Lovelace", "person", "wrote the first program", "born 1815"),
                _e("Analytical Engine", "machine", "designed by Babbage"),
                _e("Zoë", "person", 'says "hi"\tand\nleaves', "🙂"),
                _e("", "blank", "an empty name is a name"),
            ]
        },
    ),
    (
        "create_entities",
        {
            "entities": [
                _e("Ada Lovelace", "ignored", "already there"),
                _e("Babbage", "person"),
                _e("Ada Lovelace", "ignored too"),
            ]
        },
    ),
    (
        "create_relations",
        {
            "relations": [
                _r("Ada Lovelace", "programmed", "Analytical Engine"),
                _r("Babbage", "designed", "Analytical Engine"),
                _r("Zoë", "admires", "Nobody Yet"),
            ]
        },
    ),
    ("create_relations", {"relations": [_r("Babbage", "designed", "Analytical Engine")]}),
    (
        "add_observations",
        {
            "observations": [
                {"entityName": "Ada Lovelace", "contents": ["born 1815", "a poet's daughter"]},
                {"entityName": "Babbage", "contents": ["twice", "twice"]},
                {"entityName": "Ada Lovelace", "contents": ["a poet's daughter", "math"]},
            ]
        },
    ),
    (
        "add_observations",
        {
            "observations": [
                {"entityName": "Babbage", "contents": ["never saved"]},
                {"entityName": "Nobody", "contents": ["x"]},
            ]
        },
    ),
    ("read_graph", {}),
    ("search_nodes", {"query": "ENGINE"}),
    ("search_nodes", {"query": "person"}),
    ("search_nodes", {"query": "poet"}),
    ("search_nodes", {"query": "no such thing"}),
    ("open_nodes", {"names": ["Zoë", "Nobody", "Analytical Engine"]}),
    ("open_nodes", {"names": []}),
    (
        "delete_observations",
        {
            "deletions": [
                {"entityName": "Babbage", "observations": ["twice"]},
                {"entityName": "Nobody", "observations": ["x"]},
                {"entityName": "Ada Lovelace", "observations": ["not there", "math"]},
            ]
        },
    ),
    (
        "delete_relations",
        {"relations": [_r("Zoë", "admires", "Nobody Yet"), _r("a", "b", "c")]},
    ),
    ("delete_entities", {"entityNames": ["Analytical Engine", "Nobody"]}),
    ("read_graph", {}),
    ("create_entities", {"entities": [_e("Analytical Engine", "machine", "rebuilt")]}),
    ("create_relations", {"relations": [_r("", "names", "Analytical Engine")]}),
    ("read_graph", {}),
    ("open_nodes", {"names": ["Analytical Engine"]}),
]


@pytest.fixture(scope="module")
def reference_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference server's entry point, installed from npm into a temporary folder."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None:
        pytest.skip("node is not installed: the reference memory server runs on it")
    if npm is None:
        if os.environ.get("TETHER_REQUIRE_SERVERS") == "1":
            pytest.fail("node is installed but npm is not: cannot install the reference server")
        pytest.skip("npm is not installed: cannot install the reference memory server")
    folder = tmp_path_factory.mktemp("server-memory")
    proc = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), REFERENCE],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"npm install {REFERENCE} failed:\n{proc.stderr[-2000:]}")
    entry = (
        folder / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    )
    assert entry.exists(), entry
    return entry


def _outcome(result: Any) -> dict[str, Any]:
    return {
        "is_error": result.is_error,
        "text": [c.text for c in result.content],
        "structured": result.structured_content,
    }


async def _run_script(params: StdioServerParameters) -> tuple[list[dict[str, Any]], Any]:
    """The script's outcomes, then the graph resource as listed and read, and how many
    updates of it a subscribed client was sent; and the tool listing."""
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ResourceUpdatedNotification):
            updates.append(message.params.uri)

    # resources/subscribe is of the handshake era (the reference's): a legacy session
    async with Client(params, mode="legacy", message_handler=on_message) as client:
        tools = (await client.list_tools()).tools
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(GRAPH)
        outcomes = [_outcome(await client.call_tool(name, args)) for name, args in SCRIPT]
        listed = (await client.list_resources()).model_dump(exclude_none=True)["resources"]
        read = (await client.read_resource(GRAPH)).model_dump(exclude_none=True)["contents"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.send_ping()  # the notifications sent before it have arrived
    outcomes.append({"resources": listed, "read": read, "updates": updates})
    return outcomes, tools


async def test_the_same_script_gives_the_same_results(
    reference_server: Path, tmp_path: Path
) -> None:
    memory_file = tmp_path / "memory.jsonl"
    ref = StdioServerParameters(
        command="node", args=[str(reference_server)], env={"MEMORY_FILE_PATH": str(memory_file)}
    )
    store = tmp_path / "tether.db"
    ours = StdioServerParameters(
        command=TETHER, args=["--store", str(store), "mcp", "--user", "ada"]
    )
    expected, ref_tools = await _run_script(ref)
    got, our_tools = await _run_script(ours)

    def listing(tools: Any) -> dict[str, Any]:
        return {
            t.name: {
                "title": t.title,
                "description": t.description,
                "inputSchema": t.input_schema,
                "outputSchema": t.output_schema,
                "annotations": t.annotations.model_dump(exclude_none=True),
            }
            for t in tools
            if t.name in REFERENCE_TOOLS
        }

    assert sorted(t.name for t in ref_tools) == sorted(REFERENCE_TOOLS)
    assert listing(our_tools) == listing(ref_tools)
    steps = [*SCRIPT, ("the graph resource", {})]
    for (name, args), want, have in zip(steps, expected, got, strict=True):
        assert have == want, f"{name}({args})"
    assert any(o.get("is_error") for o in expected)  # the script does reach an error
    assert len(expected[-1]["updates"]) > 5  # the subscription is notified

    # the reference's own file, imported, reads back the same through tether
    final = expected[-3]["structured"]  # the last read_graph
    cli = subprocess.run(
        [TETHER, "--store", str(store), "mcp", "import-memory", str(memory_file), "--user", "bea"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    async with Client(
        StdioServerParameters(command=TETHER, args=["--store", str(store), "mcp", "--user", "bea"])
    ) as client:
        assert (await client.call_tool("read_graph", {})).structured_content == final
