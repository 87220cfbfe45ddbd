"""The inspector in a real browser: headless Chromium (Debian's, driven by Playwright) on a
real `tether serve` over a SQLite database agents have worked on. It finds the thread,
opens nodes and their State tab, lists the namespace's runs by status (those waiting for
a human), opens a run's status history and flow (a loop, its current node, run
variables) and a thread's tool state, approves a call, clears a store and then the
thread (confirming), checks through the API what changed, and saves screenshots under
the test's tmp dir."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _server_helpers import TOKEN, Served, filled_sqlite, serve

CHROMIUM = os.environ.get("TETHER_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _need_browser() -> Any:
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "playwright is not installed (pip install 'tether[browser]')"
    if missing is None and not shutil.which(CHROMIUM):
        missing = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if missing is not None:
        if os.environ.get("TETHER_REQUIRE_SERVERS") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    return sync_playwright


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    db = tmp_path / "inspector.db"
    filled_sqlite(db, flows=True)
    with serve(db, tmp_path / "serve.log", "--agent", "_server_helpers:demo_agent") as s:
        yield s


def api(served: Served, method: str, path: str, **kw: Any) -> Any:
    r = httpx.request(method, served.url.rstrip("/") + path, headers=AUTH, timeout=10, **kw)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.slow
def test_inspector_finds_opens_and_clears_a_thread(served: Served, tmp_path: Path) -> None:
    sync_playwright = _need_browser()
    thread = api(served, "GET", "/v1/ns/default/threads/support-1")
    graph = thread["stores"][-1]
    frontier = graph["metadata"]["frontier"]
    problems: list[str] = []

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 950}, accept_downloads=True)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on(
                "console",
                lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None,
            )
            page.goto(served.url)
            page.fill("#token", TOKEN)
            page.click("#connect")
            page.wait_for_selector(".whoami")

            # The thread list, then the thread's graph: every node, the frontier highlighted.
            page.click("[data-thread='support-1']")
            page.wait_for_selector("svg.graph")
            assert page.locator("g.node").count() == graph["node_count"]
            heads = page.locator("g.node-head")
            assert heads.count() == len(frontier)
            assert heads.first.get_attribute("data-node-id") in frontier
            assert page.locator("path.edge-version").count() >= 1  # a variable's versions

            # Export downloads the stored snapshot; Verify recomputes every identity.
            with page.expect_download() as download:
                page.click("text=Export")
            exported = Path(download.value.path()).read_bytes()
            direct = httpx.get(
                served.url + "v1/ns/default/threads/support-1/export", headers=AUTH, timeout=10
            )
            assert exported == direct.content
            page.click("text=Verify")
            page.wait_for_selector(f"text=Verified {graph['node_count']} nodes")

            # Open a node: its fields and payload, then the state it serves (seed 004).
            goal = page.locator("g.node[data-kind='goal']").first
            goal.click()
            panel = page.locator("#node-panel")
            assert "Hello, my name is Ada." in panel.inner_text()
            page.click("[data-paneltab='state']")
            page.wait_for_selector("#node-panel .chat")
            text = panel.inner_text()
            assert "Conversation memory" in text and "thread:support-1 · llm agent" in text
            assert "Hello, my name is Ada." in page.locator("#node-panel .chat").inner_text()
            page.screenshot(path=str(tmp_path / "inspector-node.png"))

            # The other views render from the API.
            page.click("[data-tab='variables']")
            page.wait_for_selector("tr[data-key='var:last_answer']")
            page.click("[data-tab='memory']")
            page.wait_for_selector("tr[data-key='semantic:agent_memory:notes/plan']")
            page.click("tr[data-key='semantic:agent_memory:notes/plan'] button")
            page.wait_for_selector(".versions li.current")
            page.click("[data-tab='runs']")
            page.locator("tr[data-run]").first.click()
            page.wait_for_selector(".exec-root .badge")
            page.screenshot(path=str(tmp_path / "inspector-execution.png"))

            # The namespace's runs, from the run index: all of them, then those waiting.
            every = api(served, "GET", "/v1/ns/default/runs")
            waiting = api(served, "GET", "/v1/ns/default/runs", params={"status": "suspended"})
            assert page.inner_text("#waiting-count") == f"{len(waiting['runs'])} waiting"
            page.click("#open-runs")
            page.wait_for_selector("table.run-index")
            assert page.locator("table.run-index tbody tr").count() == len(every["runs"])
            page.click(".filter-chip[data-status='suspended']")
            page.wait_for_selector(".filter-chip.active[data-status='suspended']")
            rows = page.locator("table.run-index tbody tr")
            shown = [rows.nth(i).get_attribute("data-run") for i in range(rows.count())]
            assert shown == [r["run"] for r in waiting["runs"]] and len(shown) == 2
            assert "publish" in page.inner_text("tr[data-thread='crawl-waiting']")
            page.screenshot(path=str(tmp_path / "inspector-runs.png"))

            # A run stopped mid-loop for a person: its status history, flow and variables.
            page.click("tr[data-thread='crawl-waiting']")
            page.wait_for_selector(".run-detail .timeline")
            task = api(served, "GET", "/v1/ns/default/threads/crawl-waiting/task")
            steps = page.locator(".timeline-step")
            assert [steps.nth(i).get_attribute("data-status") for i in range(steps.count())] == [
                t["status"] for t in task["history"]
            ]
            assert page.inner_text(".flow-current") == "review"
            assert "in progress" in page.inner_text("tr[data-loop='pages']")
            assert "pages_seen" in page.inner_text(".run-vars") and "2" in page.inner_text(
                ".run-vars"
            )
            assert "ticket=42" in page.inner_text(".run-meta")
            page.screenshot(path=str(tmp_path / "inspector-run.png"))
            # The node that suspended it, from its status history, in the graph.
            page.locator(".timeline-node").last.click()
            page.wait_for_selector("g.node-selected")
            selected = page.locator("g.node-selected").get_attribute("data-node-id")
            assert selected == task["history"][-1]["node"]

            # A thread's tool state, per scope, with its versions.
            page.click("[data-thread='crawl-done']")
            page.click("[data-tab='tools']")
            row = "tr[data-key='semantic:tool_state:read_page/pages_read']"
            page.wait_for_selector(row)
            assert page.inner_text(row).split("\t")[:3] == ["read_page", "pages_read", "3"]
            page.click(f"{row} button")
            page.wait_for_selector(".versions li.current")
            assert page.locator(".versions li").count() == 3  # one version per page read
            page.screenshot(path=str(tmp_path / "inspector-tools.png"))
            page.click("#clear-tools")
            page.wait_for_selector("#confirm[open]")
            page.click("#confirm-ok")
            page.wait_for_selector("text=Cleared thread:crawl-done")
            tools = api(
                served,
                "GET",
                "/v1/ns/default/threads/crawl-done",
                params={"stores": "tools", "include_data": "true"},
            )["stores"][0]
            assert tools["item_count"] == 0 and tools["data"] == {}

            # A run waiting for a person: approve its tool call from the runs tab.
            page.click("[data-thread='billing']")
            page.click("[data-tab='runs']")
            page.click("tr[data-run]")
            page.wait_for_selector(".exec-actions button")
            page.click(".exec-actions button:text('Approve')")
            page.wait_for_selector("#confirm[open]")  # approving asks first
            page.click("#confirm-ok")
            page.wait_for_selector("text=run completed")
            page.wait_for_selector("#waiting-count :text('1 waiting')")
            runs = api(
                served,
                "GET",
                "/v1/ns/default/threads/billing",
                params={"stores": "executions", "include_data": "true"},
            )["stores"][0]["data"]
            assert [r["status"] for r in runs] == ["completed"]

            # Clear one store from a node's State tab: the conversation, after confirming.
            page.click("[data-thread='support-1']")
            page.click("[data-tab='graph']")
            page.locator("g.node[data-kind='inference']").last.click()
            page.click("[data-paneltab='state']")
            page.wait_for_selector("#node-panel .chat")
            page.click("#node-panel .state-head button")
            page.wait_for_selector("#confirm[open]")
            page.click("#confirm-ok")
            page.wait_for_selector("#confirm", state="hidden")
            page.wait_for_selector(".toast-ok")
            conv = api(
                served,
                "GET",
                "/v1/ns/default/threads/support-1",
                params={"stores": "conversation", "include_data": "true"},
            )["stores"][0]
            assert conv["message_count"] == 0

            # Clear the whole thread: cancelling changes nothing, confirming deletes it.
            page.wait_for_selector("#clear-thread")
            page.click("#clear-thread")
            page.wait_for_selector("#confirm[open]")
            assert "support-1" in page.inner_text("#confirm")
            page.click("#confirm-cancel")
            before = api(served, "GET", "/v1/ns/default/threads")["threads"]
            assert "support-1" in [t["thread"] for t in before]
            page.click("#clear-thread")
            page.wait_for_selector("#confirm[open]")
            page.screenshot(path=str(tmp_path / "inspector-confirm.png"))
            page.click("#confirm-ok")
            page.wait_for_selector("text=Thread support-1 was cleared")
            assert page.locator("[data-thread='support-1']").count() == 0
            assert page.locator("[data-thread='support-2']").count() == 1
            assert page.locator("[data-thread='billing']").count() == 1
            page.screenshot(path=str(tmp_path / "inspector-cleared.png"))
        finally:
            browser.close()

    after = api(served, "GET", "/v1/ns/default/threads")["threads"]
    assert [t["thread"] for t in after] == ["billing", "crawl-done", "crawl-waiting", "support-2"]
    gone = api(served, "GET", "/v1/ns/default/threads/support-1")
    assert gone["stores"][-1]["node_count"] == 0 and gone["missing"] == ["thread:support-1"]
    assert problems == []
    shots = ("node", "execution", "runs", "run", "tools", "confirm", "cleared")
    for name in (f"inspector-{s}.png" for s in shots):
        assert (tmp_path / name).stat().st_size > 10_000
    assert TOKEN not in served.log.read_text()


@pytest.mark.slow
def test_inspector_shows_a_threads_size_after_a_prune(served: Served) -> None:
    """A thread's nodes, stored bytes, the nodes a prune removed and its last activity,
    in the thread list and the thread's header, as the stats route counts them."""
    sync_playwright = _need_browser()
    compact = {"namespace": "default", "thread": "support-1", "strategy": "recent"}
    api(served, "POST", "/state/compact", json={**compact, "max_messages": 2})
    done = api(served, "POST", "/v1/ns/default/threads/support-1/prune", json={})
    assert done["nodes"] > 0
    usage = api(served, "GET", "/v1/ns/default/threads/support-1/stats")
    head = api(served, "GET", "/v1/ns/default/threads/support-1")["stores"][-1]["metadata"]
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 950})
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.goto(served.url)
            page.fill("#token", TOKEN)
            page.click("#connect")
            item = page.locator("[data-thread='support-1']")
            item.wait_for()
            assert item.locator(".thread-meta").inner_text().startswith(f"{usage['nodes']} nodes")
            assert f"{usage['payload_bytes']} bytes stored" in (item.get_attribute("title") or "")
            item.click()
            page.wait_for_selector(".thread-pruned")
            assert page.inner_text(".thread-nodes b") == str(usage["nodes"])
            assert page.inner_text(".thread-pruned b") == str(head["sequence"] - usage["nodes"])
            size = page.locator(".thread-size").get_attribute("title") or ""
            assert size == f"{usage['payload_bytes']} bytes of stored payloads"
            assert page.inner_text(".thread-active b") == usage["last_activity"]
        finally:
            browser.close()
    assert problems == []
