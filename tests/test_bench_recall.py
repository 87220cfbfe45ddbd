"""benchmarks/recall.py's labelled set: deterministic, and each question names its memory;
recall.py and telemetry.py (the README's and docs/telemetry.md's figures) run, small."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_recall", BENCH / "recall.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_recall"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_labelled_set_is_deterministic_and_consistent() -> None:
    bench = _load()
    memories, asked = bench.dataset(1000, 50)
    assert (memories, asked) == bench.dataset(1000, 50)
    assert len(memories) == 1000 and len(set(memories)) > 900 and len(asked) == 50
    for question, right in asked:
        person = " ".join(memories[right].split()[:2]).removesuffix("'s")
        template, paraphrase, _ = bench.ATTRS[right % len(bench.ATTRS)]
        assert question == paraphrase.format(n=person)
        assert memories[right].startswith(template.split("{x}")[0].format(n=person))


def _bench(script: str, tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "out.json"
    r = subprocess.run(
        [sys.executable, str(BENCH / script), *args, "--json", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    data: dict[str, Any] = json.loads(out.read_text())
    return data


@pytest.mark.slow
def test_the_recall_benchmark_runs_and_both_systems_rank_alike(tmp_path: Path) -> None:
    """The README's recall figures come from this script: small, it still runs, and tether
    and InMemoryStore (the same embedder, exact scans) find the same answers."""
    pytest.importorskip("wordllama")
    pytest.importorskip("langgraph.store.memory")
    data = _bench("recall.py", tmp_path, "--sizes", "300", "--questions", "20")
    assert data["questions"] == 20
    systems = data["sizes"]["300"]
    assert "LangGraph InMemoryStore" in systems and any(s.startswith("tether") for s in systems)
    recalls = {s: r["recall_at_5"] for s, r in systems.items()}
    assert len(set(recalls.values())) == 1 and min(recalls.values()) >= 0.8, recalls
    for r in systems.values():
        assert 0 < r["p50_ms"] <= r["p95_ms"]


@pytest.mark.slow
def test_the_telemetry_benchmark_runs_off_without_opentelemetry(tmp_path: Path) -> None:
    """docs/telemetry.md's cost table comes from benchmarks/telemetry.py: small, it still
    runs, "off" loads nothing of OpenTelemetry and "spans" really traces."""
    pytest.importorskip("opentelemetry.sdk")
    data = _bench(
        "telemetry.py", tmp_path, "--rounds", "1", "--commits", "10", "--steps", "2",
        "--modes", "off,spans",
    )  # fmt: skip
    (off,), (spans,) = data["runs"]["off"], data["runs"]["spans"]
    assert off["tracing"] is False and off["otel_loaded"] == []
    assert spans["tracing"] is True and "sdk" in spans["otel_loaded"]
    for mode in ("off", "spans"):
        assert set(data["table"][mode]) == {"commit_memory", "commit_sqlite", "step_memory"}
        assert all(v > 0 for v in data["table"][mode].values())
