"""benchmarks/recall.py's labelled set: deterministic, and each question names its memory."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

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
