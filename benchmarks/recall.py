"""Recall by meaning: recall@5 and search latency, tether beside LangGraph's InMemoryStore.

    python benchmarks/recall.py                      # 10^3, 10^4, 10^5 memories
    python benchmarks/recall.py --sizes 1000 --questions 100     # a few seconds
    python benchmarks/recall.py --json out.json

The labelled set is generated, deterministically (a seeded ``random.Random``):
people with made-up names, each with ten facts written as a memory ("Ilvar Tosk is
allergic to shellfish") and one question per fact, paraphrased so that it shares
almost no words with the memory but the name ("what food makes Ilvar Tosk ill?").
The right answer to a question is its fact's memory. A size N holds the facts of
N/10 people; the questions (``--questions``, 300 by default) are asked about people
drawn from all of them, so a bigger N means more memories about other people that
look alike (every person has an allergy, a city, a job ...).

Both systems use the same embedder (``WordLlamaEmbedder``, 256 dimensions, offline),
embed the same text (the memory's sentence; keys are opaque ids, ``m000042``, and
neither system embeds them) and return the top 5:

* tether: ``tether.projections.recall`` over one ``user:`` scope of a SQLite file
  (the memories written with ``remember`` in transactions of 1,000), its index
  built by the first search (reported as ``index build``), twice: the default (the
  scope's vectors held as a numpy matrix, loaded once, moved in place by writes) and
  sqlite-vec in SQLite for every search (``TETHER_RECALL_HOLD_MB=0``: what a scope too
  big to hold gets); ``after a write`` is the latency of a search right after one more
  memory is written (20 times);
* LangGraph: ``InMemoryStore(index={"dims": 256, "embed": ..., "fields": ["text"]})``,
  items put in batches of 1,000 (embedding at put time), ``store.search(ns, query=q,
  limit=5)``.

recall@5: the share of questions whose right memory is among the 5 returned. Latency:
wall time per search (embedding the question included), median and 95th percentile,
one run on whatever else the machine is doing; both systems run in the same process
one after the other, so compare them side by side, not against other runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ATTRS: list[tuple[str, str, list[str]]] = [
    (
        "{n} is allergic to {x}",
        "what food makes {n} ill?",
        ["peanuts", "shellfish", "gluten", "strawberries", "eggs", "sesame", "soy", "milk"],
    ),
    (
        "{n} lives in {x}",
        "where is {n}'s home these days?",
        ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Krakow", "Denver", "Hanoi"],
    ),
    (
        "{n} works as a {x}",
        "what does {n} do for a living?",
        ["nurse", "carpenter", "pilot", "accountant", "teacher", "chef", "lawyer", "plumber"],
    ),
    (
        "{n}'s favourite colour is {x}",
        "which color does {n} like best?",
        ["blue", "green", "crimson", "yellow", "violet", "orange", "teal", "black"],
    ),
    (
        "{n} has a pet {x}",
        "which animal keeps {n} company at home?",
        ["dog", "cat", "parrot", "rabbit", "hamster", "tortoise", "goldfish", "ferret"],
    ),
    (
        "{n} speaks {x} fluently",
        "which language can {n} talk in?",
        ["Portuguese", "Japanese", "Swahili", "Polish", "Hindi", "Greek", "Korean", "Dutch"],
    ),
    (
        "{n} drives a {x}",
        "what vehicle does {n} get around in?",
        [
            "pickup truck",
            "motorbike",
            "minivan",
            "convertible",
            "hatchback",
            "scooter",
            "camper van",
            "sedan",
        ],
    ),
    (
        "{n} plays {x} every weekend",
        "what sport does {n} practise?",
        ["tennis", "football", "chess", "basketball", "golf", "volleyball", "rugby", "squash"],
    ),
    (
        "{n} is reading a book on {x}",
        "what subject has {n} been studying lately?",
        [
            "astronomy",
            "medieval history",
            "economics",
            "botany",
            "philosophy",
            "chemistry",
            "architecture",
            "poetry",
        ],
    ),
    (
        "{n} is afraid of {x}",
        "what scares {n} the most?",
        [
            "spiders",
            "heights",
            "thunderstorms",
            "deep water",
            "snakes",
            "crowds",
            "darkness",
            "flying",
        ],
    ),
]

_SYL = [
    "ka",
    "lo",
    "mi",
    "ren",
    "to",
    "sa",
    "vi",
    "dor",
    "el",
    "an",
    "ur",
    "is",
    "bel",
    "ti",
    "mar",
    "no",
    "qua",
    "zen",
    "ho",
    "ly",
    "pe",
    "gor",
    "du",
    "fin",
]


def _name(rng: random.Random) -> str:
    first = "".join(rng.choice(_SYL) for _ in range(rng.randint(2, 3))).capitalize()
    last = "".join(rng.choice(_SYL) for _ in range(rng.randint(2, 3))).capitalize()
    return f"{first} {last}"


def dataset(size: int, questions: int, seed: int = 7) -> tuple[list[str], list[tuple[str, int]]]:
    """(memories, [(question, index of its right memory)]): size memories, deterministic."""
    rng = random.Random(seed)
    people: list[str] = []
    seen: set[str] = set()
    while len(people) < size // len(ATTRS):
        n = _name(rng)
        if n not in seen:
            seen.add(n)
            people.append(n)
    memories: list[str] = []
    for n in people:
        for tmpl, _, values in ATTRS:
            memories.append(tmpl.format(n=n, x=rng.choice(values)))
    qrng = random.Random(seed + 1)
    asked: list[tuple[str, int]] = []
    for _ in range(questions):
        p = qrng.randrange(len(people))
        a = qrng.randrange(len(ATTRS))
        asked.append((ATTRS[a][1].format(n=people[p]), p * len(ATTRS) + a))
    return memories, asked


def _summary(hits: list[bool], lat: list[float]) -> dict[str, Any]:
    lat_ms = sorted(x * 1000 for x in lat)
    return {
        "recall_at_5": sum(hits) / len(hits),
        "p50_ms": statistics.median(lat_ms),
        "p95_ms": lat_ms[min(len(lat_ms) - 1, int(len(lat_ms) * 0.95))],
    }


async def run_tether(
    memories: list[str], asked: list[tuple[str, int]], *, engine: str = "held scan"
) -> dict[str, Any]:
    import os

    from tether.models.embeddings import WordLlamaEmbedder
    from tether.projections import recall, remember
    from tether.projections.recall_index import vector_table
    from tether.store import open_store
    from tether.store.txn import transact

    emb = WordLlamaEmbedder()
    os.environ["TETHER_RECALL_HOLD_MB"] = "0" if engine == "sqlite-vec" else "512"
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(f"sqlite:///{Path(tmp) / 'recall.db'}")
        scope = "user:bench"
        t0 = time.perf_counter()
        for start in range(0, len(memories), 1000):

            async def write(t: Any, start: int = start) -> None:
                for i in range(start, min(start + 1000, len(memories))):
                    await t.semantic(scope, "memory", f"m{i:06d}", memories[i])

            await transact(store, "default", write)
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        await recall(store, "default", scope, "warm up", embedder=emb, k=5)
        build_s = time.perf_counter() - t0
        hits: list[bool] = []
        lat: list[float] = []
        for q, right in asked:
            t0 = time.perf_counter()
            found = await recall(store, "default", scope, q, embedder=emb, k=5)
            lat.append(time.perf_counter() - t0)
            hits.append(f"m{right:06d}" in {h.key for h in found})
        after: list[float] = []
        for i, (q, _) in enumerate(asked[:20]):
            await remember(store, "default", scope, "memory", f"new{i:03d}", memories[i])
            t0 = time.perf_counter()
            await recall(store, "default", scope, q, embedder=emb, k=5)
            after.append(time.perf_counter() - t0)
        ran = getattr(vector_table(store), "searched_by", "?")
        await store.close()
    os.environ.pop("TETHER_RECALL_HOLD_MB", None)
    if ran != engine:
        raise SystemExit(f"asked for {engine}, ran {ran}")
    return {
        **_summary(hits, lat),
        "write_s": write_s,
        "index_build_s": build_s,
        "after_write_p50_ms": statistics.median(x * 1000 for x in after),
    }


def run_langgraph(memories: list[str], asked: list[tuple[str, int]]) -> dict[str, Any]:
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    from tether.models.embeddings import WordLlamaEmbedder

    emb = WordLlamaEmbedder()
    store = InMemoryStore(index={"dims": 256, "embed": emb.embed_sync, "fields": ["text"]})
    ns = ("users", "bench")
    t0 = time.perf_counter()
    for start in range(0, len(memories), 1000):
        store.batch(
            [
                PutOp(ns, f"m{i:06d}", {"text": memories[i]})
                for i in range(start, min(start + 1000, len(memories)))
            ]
        )
    write_s = time.perf_counter() - t0
    hits: list[bool] = []
    lat: list[float] = []
    for q, right in asked:
        t0 = time.perf_counter()
        found = store.search(ns, query=q, limit=5)
        lat.append(time.perf_counter() - t0)
        hits.append(f"m{right:06d}" in {h.key for h in found})
    after: list[float] = []
    for i, (q, _) in enumerate(asked[:20]):
        store.put(ns, f"new{i:03d}", {"text": memories[i]})
        t0 = time.perf_counter()
        store.search(ns, query=q, limit=5)
        after.append(time.perf_counter() - t0)
    return {
        **_summary(hits, lat),
        "write_s": write_s,
        "index_build_s": 0.0,
        "after_write_p50_ms": statistics.median(x * 1000 for x in after),
    }


def table(results: dict[str, Any]) -> list[str]:
    rows = [
        "| memories | system | recall@5 | search p50 | search p95 | after a write p50"
        " | write all | index build |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for size, by in results["sizes"].items():
        for system, r in by.items():
            rows.append(
                f"| {int(size):,} | {system} | {r['recall_at_5']:.1%} | {r['p50_ms']:.2f} ms | "
                f"{r['p95_ms']:.2f} ms | {r['after_write_p50_ms']:.2f} ms | "
                f"{r['write_s']:.1f} s | {r['index_build_s']:.1f} s |"
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument(
        "--questions",
        default="300",
        help="questions per size: one number, or one per size (300,300,100)",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    counts = [int(q) for q in args.questions.split(",")]
    counts += [counts[-1]] * (len(sizes) - len(counts))
    results: dict[str, Any] = {
        "questions": counts[0]
        if len(set(counts)) == 1
        else dict(zip(args.sizes.split(","), counts, strict=True)),
        "sizes": {},
    }
    for size, questions in zip(sizes, counts, strict=True):
        memories, asked = dataset(size, questions)
        by = {
            "tether (SQLite, default: held scan)": asyncio.run(run_tether(memories, asked)),
            "tether (SQLite, sqlite-vec every search)": asyncio.run(
                run_tether(memories, asked, engine="sqlite-vec")
            ),
            "LangGraph InMemoryStore": run_langgraph(memories, asked),
        }
        results["sizes"][str(size)] = by
        print(f"{size}: " + json.dumps(by), file=sys.stderr, flush=True)
    print("\n".join(table(results)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
