"""Where tether is slower than a peer, and why: computed from one run's results.

Every tether system is compared with every peer on the same backend (SQLite with
SQLite, PostgreSQL with PostgreSQL) on every figure of the table: the (A) latency
windows, (B) turns/s, (C) load time and bytes/turn. Each figure where tether is
worse gets a line with both values and the reason, with numbers from the same run
where the run measured them (bytes per table, open vs read time). The sqlite3 floor
is not a peer, but what tether costs over it is stated as well.

Used by run.py for the terminal and the README section.
"""

from __future__ import annotations

from typing import Any

PAGE = 4096  # SQLite's default page size: an object of one page holds (almost) nothing

# tether inside a framework -> that framework's own store, run beside it in one venv:
# such a system is compared with its pair only (and is no peer of tether's own systems).
PAIRS = {"langgraph_tether_sqlite": "langgraph_sqlite"}


def _peers(t: dict[str, Any], systems: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The systems ``t`` is compared with: its pair, or every peer on its backend."""
    if t["system"] in PAIRS:
        return [p for p in systems if p["system"] == PAIRS[t["system"]]]
    if not t["system"].startswith("tether_"):
        return []
    return [
        p
        for p in systems
        if p.get("venv") == "peers"
        and p.get("backend") == t.get("backend")
        and p["system"] not in PAIRS
    ]


def figures(s: dict[str, Any]) -> dict[str, tuple[str, float, bool]]:
    """``{key: (label, value, lower_is_better)}`` for every figure this system has."""
    out: dict[str, tuple[str, float, bool]] = {}
    for k, v in (s.get("windows") or {}).items():
        if v is not None:
            out[f"A {k}"] = (f"(A) ms/turn at turns {k}", v, True)
    b = (s.get("threads") or {}).get("turns_per_s")
    if b:
        out["B"] = ("(B) turns/s", b, False)
    c = (s.get("load") or {}).get("total_ms")
    if c is not None:
        out["C"] = ("(C) load ms", c, True)
    by = (s.get("write") or {}).get("bytes_per_turn")
    if by is not None:
        out["bytes"] = ("bytes/turn", by, True)
    return out


def _fmt(key: str, v: float) -> str:
    if key == "B":
        return f"{v:,.0f}"
    if key == "bytes":
        return f"{v:,.0f} B"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


def _usable(s: dict[str, Any]) -> bool:
    return "skipped" not in s and "write" in s and "error" not in s


def findings(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per (tether system, peer, figure) where tether is worse."""
    systems = [s for s in results["systems"] if _usable(s)]
    out: list[dict[str, Any]] = []
    for t in systems:
        tf = figures(t)
        for p in _peers(t, systems):
            pf = figures(p)
            for key, (label, tv, lower) in tf.items():
                if key not in pf:
                    continue
                pv = pf[key][1]
                if (tv > pv) if lower else (tv < pv):
                    out.append(
                        {"tether": t, "peer": p, "key": key, "label": label, "t": tv, "p": pv}
                    )
    return out


def _why(key: str, t: dict[str, Any], p: dict[str, Any], turns: int) -> str:
    backend = t.get("backend")
    if t["system"] in PAIRS:
        return _why_pair(key, t, p)
    if key == "bytes":
        return _why_bytes(t, p, turns)
    if key == "C":
        c = t.get("load") or {}
        return (
            f"(C) builds full causal nodes (content id, parents, kind, createdAt, sequence "
            f"and the decoded payload), about twice the Python objects per message of a "
            f"list of message dicts, and a fresh process pays page faults for that memory; "
            f"of tether's {c.get('total_ms', 0):.1f} ms, opening the store (schema version "
            f"check, the encrypted-file check) took {c.get('open_ms', 0):.1f} ms and "
            f"reading {c.get('load_ms', 0):.1f} ms"
        )
    if backend == "postgres":
        return (
            "a turn is two round trips to the server: the thread's head, then one "
            "statement that checks the head has not moved and inserts both nodes"
        )
    return (
        "per turn tether reads the thread's head, hashes both nodes (SHA-256 of RFC 8785 "
        "JSON) and, under the write lock, checks the head has not moved before inserting "
        "(optimistic concurrency); the fsync is the same"
    )


def _why_pair(key: str, t: dict[str, Any], p: dict[str, Any]) -> str:
    if key == "C":
        return (
            "a fresh process reads the checkpoint, the list's tree leaves (each full leaf "
            "carries its 32 messages' bytes) and the last leaf's messages as separate "
            "nodes, where SqliteSaver reads one blob; both then decode every message"
        )
    if key == "bytes":
        return "the first turns store each message with its readable projection"
    return (
        "each put or put_writes is one tether transaction: it reads the thread's head, "
        "the checkpoint key's head and which planned nodes exist, hashes the new nodes "
        "(SHA-256 of RFC 8785 JSON) and checks the head under the write lock, where "
        "SqliteSaver runs one INSERT; both serialize the changed channels and fsync once"
    )


def _why_bytes(t: dict[str, Any], p: dict[str, Any], turns: int) -> str:
    tb = (t.get("write") or {}).get("bytes_by_object") or {}
    pb = (p.get("write") or {}).get("bytes_by_object") or {}
    if not tb or not pb:
        return (
            "each message also carries its 12-byte content id and a 12-byte parent link, "
            "and the content ids are indexed (idempotent appends, lookups by id)"
        )
    rows = tb.get("tether_nodes", 0) / turns
    ids = tb.get("tether_nodes_id", 0) / turns
    small = [k for k, v in tb.items() if v <= PAGE]
    small_b = sum(tb[k] for k in small) / turns
    main, main_b = max(pb.items(), key=lambda kv: kv[1])
    p_small = [k for k, v in pb.items() if v <= PAGE]
    p_small_b = sum(pb[k] for k in p_small) / turns
    p_rest = (sum(pb.values()) - main_b) / turns - p_small_b
    return (
        f"per turn, tether's node rows take {rows:.0f} B ({p['label']}'s `{main}`: "
        f"{main_b / turns:.0f} B); its index of content ids, which makes appends "
        f"idempotent and lookups by id indexed, {ids:.0f} B (the peer's other indexes: "
        f"{p_rest:.0f} B); and {len(small)} tables and indexes that hold almost nothing in "
        f"this workload (scopes, resource heads, schema version...) take one {PAGE // 1024} "
        f"KiB page each, {small_b:.0f} B per turn at {turns:,} turns (the peer's "
        f"{len(p_small)}: {p_small_b:.0f} B), a fixed cost that does not grow with history"
    )


def floor_gap(results: dict[str, Any]) -> list[str]:
    """What tether on SQLite costs over the sqlite3 floor, figure by figure."""
    by = {s["system"]: s for s in results["systems"] if _usable(s)}
    t, f = by.get("tether_sqlite"), by.get("sqlite_floor")
    if not t or not f:
        return []
    tf, ff = figures(t), figures(f)
    bits = []
    for key, (label, tv, _) in tf.items():
        if key in ff:
            fv = ff[key][1]
            ratio = (tv / fv if key != "B" else fv / tv) if tv and fv else 0.0
            bits.append(f"{label} {_fmt(key, tv)} vs {_fmt(key, fv)} ({ratio:.2f}x)")
    if not bits:
        return []
    return [
        f"- Against the sqlite3 floor (two INSERTs and a COMMIT, what no library on SQLite "
        f"can beat), tether (SQLite): {'; '.join(bits)}. The difference is what tether adds "
        "to a message table: content identity, causal links, the optimistic head check and "
        "typed nodes on reading."
    ]


def section(results: dict[str, Any]) -> list[str]:
    """Markdown lines: the findings grouped by tether system and peer, then the floor."""
    turns = results["meta"]["workload"]["turns"]
    found = findings(results)
    lines: list[str] = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in found:
        groups.setdefault((f["tether"]["label"], f["peer"]["label"]), []).append(f)
    for (tl, pl), fs in groups.items():
        figs = "; ".join(
            f"{f['label']} {_fmt(f['key'], f['t'])} vs {_fmt(f['key'], f['p'])}" for f in fs
        )
        lines.append(f"- **{tl}** is behind **{pl}** on {figs}.")
        seen: set[str] = set()
        for f in fs:
            kind = "A" if f["key"].startswith("A ") else f["key"]
            if kind in seen:
                continue
            seen.add(kind)
            lines.append(
                f"  - {f['label'].split(' at ')[0]}: {_why(f['key'], f['tether'], f['peer'], turns)}."
            )
    usable = [s for s in results["systems"] if _usable(s)]
    behind = {f["tether"]["label"] for f in found}
    for t in usable:
        if t["label"] in behind:
            continue
        peers = _peers(t, usable)
        if not peers and not t["system"].startswith("tether_"):
            continue
        if peers:
            lines.append(
                f"- **{t['label']}** is ahead of every peer on its backend "
                f"({', '.join(p['label'] for p in peers)}) on every figure."
            )
        else:
            lines.append(f"- **{t['label']}** has no peer on its backend in this run.")
    lines += floor_gap(results)
    return lines


# -- one agent turn (benchmarks/agent_turn.py) ------------------------------------------------


def agent_turn(turn: dict[str, Any]) -> list[str]:
    """Per workload and history: tether (Window) against the fastest peer, and why, from the
    run's own counts (commits per turn, each one fsync of the WAL; CPU ms per turn)."""
    runs = [r for r in turn.get("runs", []) if "histories" in r]
    lines: list[str] = []
    for wl in dict.fromkeys(r["workload"] for r in runs):
        t = next((r for r in runs if r["workload"] == wl and r["system"] == "tether_window"), None)
        peers = [r for r in runs if r["workload"] == wl and not r["system"].startswith("tether_")]
        if t is None or not peers:
            continue
        behind, ahead = [], []
        for h in map(str, turn["histories"]):
            best = min(peers, key=lambda p: p["histories"][h]["median_ms"])
            tv, pv = t["histories"][h]["median_ms"], best["histories"][h]["median_ms"]
            bit = f"@{int(h):,}: {tv:.2f} ms vs {best['label']} {pv:.2f} ms ({tv / pv:.2f}x)"
            (behind if tv > pv else ahead).append(bit)
        th = t["histories"]

        def rng(r: dict[str, Any], key: str) -> str:
            vals = sorted({f"{v.get(key, 0):g}" for v in r["histories"].values()}, key=float)
            return vals[0] if len(vals) == 1 else f"{vals[0]}-{vals[-1]}"

        counts = "; ".join(
            f"{r['label']} {rng(r, 'commits_per_turn')} commits, "
            f"{min(v['cpu_median_ms'] for v in r['histories'].values() if 'cpu_median_ms' in v):.2f}-"
            f"{max(v['cpu_median_ms'] for v in r['histories'].values() if 'cpu_median_ms' in v):.2f}"
            " CPU ms"
            for r in [t, *peers]
            if all("cpu_median_ms" in v for v in r["histories"].values())
        )
        flat = [th[str(h)]["median_ms"] for h in turn["histories"]]
        lines.append(
            f"- `{wl}`: tether Window(20) is behind the fastest peer at "
            + (", ".join(behind) if behind else "no history length")
            + "; ahead at "
            + (", ".join(ahead) if ahead else "no history length")
            + f". Its turn stays within {min(flat):.2f}-{max(flat):.2f} ms from "
            f"{turn['histories'][0]:,} to {turn['histories'][-1]:,} turns of history."
            + (
                f" Per turn: {counts}. With synchronous=FULL every commit waits for an fsync "
                "of the WAL, so commits per turn, more than CPU, set the wall time."
                if counts
                else ""
            )
        )
    return lines
