"""The inspector on a LangGraph thread, in a real browser (headless Chromium, Playwright).

A LangGraph agent with a tool runs on ``TetherSaver`` over SQLite; ``tether serve``
serves that file. The thread's Conversation tab shows the messages as text (the
question, the tool call, the tool result, the answer); its Graph tab shows the
messages and hides the saver's bookkeeping nodes (checkpoints, id pointers, list
trees, writes) behind one button, which brings them back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("langgraph.graph")

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from _server_helpers import TOKEN, Served, serve
from test_adapter_langgraph import _tool_loop_graph
from test_inspector_browser import ARGS, AUTH, CHROMIUM, _need_browser
from tether.adapters.langgraph import TetherSaver


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    db = tmp_path / "lg.db"

    async def fill() -> None:
        config: RunnableConfig = {"configurable": {"thread_id": "weather"}}
        async with await TetherSaver.afrom_url(f"sqlite:///{db}") as saver:
            graph = _tool_loop_graph(saver)
            await graph.ainvoke({"messages": [HumanMessage("Weather in Paris?")]}, config)

    asyncio.run(fill())
    with serve(db, tmp_path / "serve.log") as s:
        yield s


def _graph_report(served: Served) -> Any:
    r = httpx.get(served.url + "v1/ns/default/threads/weather", headers=AUTH, timeout=10)
    assert r.status_code == 200, r.text
    (graph,) = [s for s in r.json()["stores"] if s["name"] == "graph"]
    return graph


@pytest.mark.slow
def test_inspector_reads_a_langgraph_thread(served: Served, tmp_path: Path) -> None:
    sync_playwright = _need_browser()
    total = _graph_report(served)["node_count"]
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.goto(served.url)
            page.fill("#token", TOKEN)
            page.click("#connect")
            page.wait_for_selector(".whoami")
            page.click("[data-thread='weather']")
            page.wait_for_selector("svg.graph")

            # Graph: the 4 messages only, the bookkeeping one click away.
            kinds = page.locator("g.node")
            shown = [kinds.nth(i).get_attribute("data-kind") for i in range(kinds.count())]
            assert shown == ["goal", "inference", "tool_result", "inference"]
            toggle = page.locator("#bookkeeping-toggle")
            assert f"Show {total - 4} bookkeeping nodes" in toggle.inner_text()
            page.screenshot(path=str(tmp_path / "lg-graph.png"))
            toggle.click()
            page.wait_for_selector("text=Hide the saver's bookkeeping nodes")
            assert page.locator("g.node").count() == total
            page.click("#bookkeeping-toggle")
            page.wait_for_selector("text=bookkeeping nodes (checkpoints")
            assert page.locator("g.node").count() == 4

            # Conversation: the text, the tool call, the tool result.
            page.click("[data-tab='conversation']")
            page.wait_for_selector(".chat")
            msgs = page.locator(".chat li.msg")
            assert msgs.count() == 4
            text = page.locator(".chat").inner_text()
            for want in ("Weather in Paris?", "weather", "Paris", "sunny", "It is sunny."):
                assert want in text, (want, text)
            page.screenshot(path=str(tmp_path / "lg-conversation.png"))
        finally:
            browser.close()
    assert not problems, problems
