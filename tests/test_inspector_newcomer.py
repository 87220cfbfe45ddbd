"""The inspector's newcomer items, each in a real browser (headless Chromium driven by
Playwright, as tests/test_inspector_browser.py) on a real `tether serve`: approving a
tool call asks first, inference and semantic nodes have clearly different colours, a
compaction summary reads as words, nothing overflows below 900 px, and sizes are in
KiB/MiB as in the CLI."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _server_helpers import TOKEN, Served, filled_sqlite, serve
from test_inspector_browser import ARGS, AUTH, CHROMIUM, _need_browser

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("inspector-newcomer")
    db = tmp / "inspector.db"
    filled_sqlite(db, flows=True)
    with serve(db, tmp / "serve.log", "--agent", "_server_helpers:demo_agent") as s:
        yield s


@pytest.fixture(scope="module")
def browser(served: Served) -> Iterator[Any]:
    sync_playwright = _need_browser()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def api(served: Served, method: str, path: str, **kw: Any) -> Any:
    r = httpx.request(method, served.url.rstrip("/") + path, headers=AUTH, timeout=10, **kw)
    assert r.status_code == 200, r.text
    return r.json()


def open_page(browser: Any, served: Served, width: int = 1500) -> tuple[Any, list[str]]:
    problems: list[str] = []
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.goto(served.url)
    page.fill("#token", TOKEN)
    page.click("#connect")
    page.wait_for_selector(".whoami")
    return page, problems


def waiting_runs(served: Served, thread: str) -> list[str]:
    data = api(
        served,
        "GET",
        f"/v1/ns/default/threads/{thread}",
        params={"stores": "executions", "include_data": "true"},
    )
    return [r["status"] for r in data["stores"][0]["data"]]


def test_approving_a_call_asks_first(browser: Any, served: Served, tmp_path: Path) -> None:
    page, problems = open_page(browser, served)
    page.click("[data-thread='billing']")
    page.click("[data-tab='runs']")
    page.click("tr[data-run]")
    page.wait_for_selector(".exec-actions button")
    page.click(".exec-actions button:text('Approve')")
    page.wait_for_selector("#confirm[open]")
    question = page.inner_text("#confirm")
    assert "Approve tool call" in question and "billing" in question
    assert "transfer" in question  # names the tool it would run
    page.screenshot(path=str(tmp_path / "approve-confirm.png"))
    page.click("#confirm-cancel")
    page.wait_for_selector("#confirm", state="hidden")
    assert waiting_runs(served, "billing") == ["suspended"]  # cancelling decided nothing
    page.click(".exec-actions button:text('Approve')")
    page.wait_for_selector("#confirm[open]")
    page.click("#confirm-ok")
    page.wait_for_selector("text=run completed")
    assert waiting_runs(served, "billing") == ["completed"]
    assert problems == []
    page.close()


def _lab(rgb: str) -> tuple[float, float, float]:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", rgb)[:3])

    def lin(c: float) -> float:
        return ((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92

    r, g, b = lin(r), lin(g), lin(b)
    x = (r * 0.4124 + g * 0.3576 + b * 0.1805) / 0.95047
    y = r * 0.2126 + g * 0.7152 + b * 0.0722
    z = (r * 0.0193 + g * 0.1192 + b * 0.9505) / 1.08883

    def f(v: float) -> float:
        return v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_inference_and_semantic_nodes_are_told_apart(browser: Any, served: Served) -> None:
    """CIE76 colour distances as the browser computes them, in the graph and the chips."""
    page, problems = open_page(browser, served)
    page.click("[data-thread='support-1']")
    page.wait_for_selector("svg.graph")
    drawn = {
        kind: page.locator(f"g.node[data-kind='{kind}'] .node-kind").first.evaluate(
            "e => getComputedStyle(e).fill"
        )
        for kind in ("inference", "semantic")
    }
    assert math.dist(_lab(drawn["inference"]), _lab(drawn["semantic"])) >= 40, drawn
    chips = page.evaluate(
        """() => Object.fromEntries(["system", "goal", "inference", "tool_call", "tool_result",
             "verification", "answer", "protocol_error", "resource", "semantic"].map((k) => {
               const e = document.createElement("span");
               e.className = `kind-chip kind-${k}`;
               document.body.append(e);
               const c = getComputedStyle(e).backgroundColor;
               e.remove();
               return [k, c];
             }))"""
    )
    assert math.dist(_lab(chips["inference"]), _lab(chips["semantic"])) >= 40, chips
    for a, b in itertools.combinations(chips, 2):
        assert math.dist(_lab(chips[a]), _lab(chips[b])) >= 20, (a, b, chips[a], chips[b])
    assert problems == []
    page.close()


def test_a_summary_node_reads_as_words(browser: Any, served: Served) -> None:
    done = api(
        served,
        "POST",
        "/state/compact",
        json={
            "namespace": "default",
            "thread": "support-1",
            "strategy": "summary",
            "max_messages": 4,
            "preserve_recent": 2,
        },
    )
    assert done["compacted"] == ["conversation"], done
    page, problems = open_page(browser, served)
    page.click("[data-thread='support-1']")
    page.wait_for_selector("svg.graph")
    node = page.locator("g.node[data-kind='semantic']").filter(has_text="summary of").first
    assert re.search(r"summary of \d+ messages? through #\d+", node.text_content() or "")
    node.click()
    page.wait_for_selector("#node-panel .summary-block")
    head = page.inner_text("#node-panel .panel-summary")
    assert head.startswith("summary of ") and "{" not in head
    block = page.inner_text("#node-panel .summary-block")
    assert re.search(r"Stands for \d+ earlier messages? of llm agent, up to node #\d+", block)
    assert "strategy summary" in block
    assert problems == []
    page.close()


@pytest.mark.parametrize("width", [880, 720, 600])
def test_nothing_overflows_below_900_px(browser: Any, served: Served, width: int) -> None:
    page, problems = open_page(browser, served, width=width)
    page.click("[data-thread='support-1']")
    page.wait_for_selector("svg.graph")
    page.locator("g.node[data-kind='goal']").first.click()
    page.wait_for_selector("#node-panel .fields")
    sizes = page.evaluate(
        """() => {
          const panel = document.querySelector("#node-panel").getBoundingClientRect();
          const main = document.querySelector("main");
          return {page: document.documentElement.scrollWidth, view: window.innerWidth,
                  main: main.scrollWidth - main.clientWidth,
                  left: panel.left, right: panel.right, panelWidth: panel.width};
        }"""
    )
    assert sizes["page"] <= sizes["view"], sizes  # no horizontal scroll of the page
    assert sizes["main"] <= 1, sizes  # nothing clipped inside the main pane
    assert sizes["left"] >= 0 and sizes["right"] <= sizes["view"], sizes
    assert sizes["panelWidth"] >= width * 0.6, sizes  # the node panel is usable
    assert problems == []
    page.close()


def test_sizes_use_the_cli_units(browser: Any, served: Served) -> None:
    page, problems = open_page(browser, served)
    page.click("[data-thread='support-1']")
    page.wait_for_selector("svg.graph")
    text = page.inner_text("body")
    sizes = re.findall(r"\b\d+(?:\.\d)? ?(?:B|KB|kB|KiB|MB|MiB)\b", text)
    assert sizes, text[:500]
    assert all(re.fullmatch(r"\d+ B|\d+\.\d (?:KiB|MiB)", s) for s in sizes), sizes
    assert any(s.endswith("KiB") for s in sizes), sizes  # support-1 holds more than 1 KiB
    assert problems == []
    page.close()
