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


def _why(key: str, t: dict[str, Any], p: dict[str, Any], turns: int, replayed: bool = False) -> str:
    backend = t.get("backend")
    if t["system"] in PAIRS:
        return _why_pair(key, t, p, replayed)
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
        "per turn tether reads the thread's head and hashes both nodes (SHA-256 of RFC 8785 "
        "JSON); its one INSERT checks the head has not moved (optimistic concurrency) and "
        "writes the node table and its index of content ids, a random leaf of it per node; "
        "the fsync is the same"
    )


def _why_pair(key: str, t: dict[str, Any], p: dict[str, Any], replayed: bool = False) -> str:
    if key == "C":
        return (
            "a fresh process reads the checkpoint, the list's tree (each leaf carries its "
            "32 messages' bytes) and the messages after the last whole leaf, about 80 JSON "
            "rows for 2,000 messages, where SqliteSaver reads one blob; both then decode "
            "every message"
        )
    if key == "bytes":
        return "the first turns store each message with its readable projection"
    return (
        "both commit 5 times a turn (3 puts, 2 put_writes) and serialize the changed "
        "channels; on top, each tether put plans the list's new elements and tree nodes "
        "and hashes each node (SHA-256 of RFC 8785 JSON), and its one INSERT writes the "
        "node table and its id and resource-key indexes, about 9 WAL pages a commit "
        "against SqliteSaver's 5 over 200 threads (benchmarks/langgraph_replay.py --wal)"
        + (
            "; the replay of this run's calls below splits both savers' turns"
            if replayed
            else ": measured in one thread (replaying a run's calls), the saver's own Python "
            "is most of the difference"
        )
    )


def langgraph_bound(replays: Any) -> list[str]:
    """Markdown lines from ``benchmarks/langgraph_replay.py`` results (a list of its
    ``measure`` results): each saver's turn split into LangGraph's serializer, SQLite
    and the rest, and whether what TetherSaver cannot skip already exceeds SqliteSaver's
    whole turn. None, an error or an empty list: no lines."""
    if not isinstance(replays, list) or not replays:
        return []
    lines = [
        "- **What TetherSaver cannot skip, against SqliteSaver's whole turn** "
        "(`benchmarks/langgraph_replay.py` in this run: the checkpointer calls of the "
        "bench's graph recorded, then replayed one after the other on one thread on a "
        "fresh saver of each kind, SQLite in WAL mode at synchronous=NORMAL, the best of "
        f"{replays[0].get('repeats', '?')} replays). Both savers run LangGraph's serializer "
        "on what LangGraph hands them (storing what it would see is what makes a put "
        "exact); TetherSaver then writes the rows of this store (SQLite: its statements "
        "on the store's cursor, a lower bound) and hashes every node it builds (RFC 8785 "
        "JSON and SHA-256, the identity rule). When those three alone take longer than "
        "SqliteSaver's whole turn, no saver on this store can tie it, however little else "
        "it does:",
    ]
    for r in replays:
        t, s = r["tether"], r["sqlite"]
        serde, sql, ident = (
            t["serde_ms_per_turn"],
            t["sql_ms_per_turn"],
            t["identity_ms_per_turn"],
        )
        floor = serde + sql + ident
        total = s["ms_per_turn"]
        s_rest = total - s["serde_ms_per_turn"] - s["sql_ms_per_turn"]
        lines.append(
            f"  - {r['turns']} turns on each of {r['threads']} threads, ms a turn: TetherSaver "
            f"{t['ms_per_turn']:.2f} (serializer {serde:.2f}, SQLite {sql:.2f}, identity "
            f"hashing {ident:.2f}, the rest {t['ms_per_turn'] - floor:.2f}); SqliteSaver "
            f"{total:.2f} (serializer {s['serde_ms_per_turn']:.2f}, SQLite "
            f"{s['sql_ms_per_turn']:.2f}, the rest {s_rest:.2f}). TetherSaver's serializer, "
            f"SQLite and hashing alone: {floor:.2f}, {floor / total:.2f}x SqliteSaver's "
            f"whole turn ({'over' if floor > total else 'under'} it)"
        )
    return lines


def cold_bound(cold: Any) -> list[str]:
    """Markdown lines from ``langgraph_replay.py --cold`` (``cold``): one ``get_tuple``
    of a long thread's latest checkpoint in a fresh process, each saver's split into
    LangGraph's serializer, SQLite and the rest, and whether TetherSaver's serializer,
    SQLite and JSON parsing alone exceed SqliteSaver's whole read. None or an error: no
    lines."""
    if not isinstance(cold, dict) or "tether" not in cold or "sqlite" not in cold:
        return []
    t, s = cold["tether"], cold["sqlite"]
    floor = t["serde_ms"] + t["sql_ms"] + t["json_ms"]
    rest = t["ms"] - floor
    s_rest = s["ms"] - s["serde_ms"] - s["sql_ms"]
    return [
        f"- **The cold read, split the same way** (`benchmarks/langgraph_replay.py --cold "
        f"{cold['turns']}` in this run: a {cold['turns']:,}-turn thread, then one "
        f"`get_tuple` of its latest checkpoint in a fresh process, the median of "
        f"{cold['runs']} processes each): TetherSaver {t['ms']:.2f} ms (serializer "
        f"{t['serde_ms']:.2f}, SQLite {t['sql_ms']:.2f}, parsing its rows' JSON "
        f"{t['json_ms']:.2f}, the rest {rest:.2f}), SqliteSaver {s['ms']:.2f} (serializer "
        f"{s['serde_ms']:.2f}, SQLite {s['sql_ms']:.2f}, the rest {s_rest:.2f}), "
        f"{t['messages']:,.0f} messages each. TetherSaver's serializer, SQLite and JSON "
        f"parsing alone: {floor:.2f} ms, {floor / s['ms']:.2f}x SqliteSaver's whole read "
        f"({'over' if floor > s['ms'] else 'under'} it): SqliteSaver reads one blob, this "
        "store's rows hold JSON"
    ]


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
        f"this workload ({', '.join(sorted(small))}) take one {PAGE // 1024} "
        f"KiB page each, {small_b:.0f} B per turn at {turns:,} turns (the peer's "
        f"{len(p_small)}: {p_small_b:.0f} B), a fixed cost that does not grow with history"
    )


def floor_gap(results: dict[str, Any]) -> list[str]:
    """What tether on SQLite costs over the sqlite3 floor, figure by figure, and where
    the difference goes as benchmarks/floor_gap.py measured it in the same run."""
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
    rest = where_the_rest_goes(results.get("floor_gap") or {})
    return [
        f"- Against the sqlite3 floor (two INSERTs and a COMMIT, what no library on SQLite "
        f"can beat), tether (SQLite): {'; '.join(bits)}."
        + (
            " Where the rest goes, measured by `benchmarks/floor_gap.py` in this run:"
            if rest
            else ""
        ),
        *[f"  - {r}" for r in rest],
    ]


def _get(d: Any, *path: str) -> Any:
    """``d[path[0]][path[1]]...``, or None where any step is missing."""
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _per(by: dict[str, float], prefix: str) -> str:
    """An object's leaf and internal frames per commit, as measured."""
    parts = [
        f"{kind} {by[f'{prefix} {kind}']:.2f}"
        for kind in ("leaf", "internal")
        if by.get(f"{prefix} {kind}", 0) >= 0.005
    ]
    return f"`{prefix}` " + " + ".join(parts) if parts else ""


def _median_of(n: Any) -> str:
    return "one process" if n == 1 else f"median of {n} processes"


def _least_of(n: Any) -> str:
    return "one process" if n == 1 else f"the least of {n} processes"


def where_the_rest_goes(g: dict[str, Any]) -> list[str]:
    """One sentence per measured cause (frames, statements, CPU, cold load); a figure
    the run did not produce is left out, never guessed."""
    if not g or "error" in g:
        return []
    m = g.get("meta") or {}
    out: list[str] = []
    many_t, many_f = _get(g, "frames", "many", "tether"), _get(g, "frames", "many", "floor")
    one_t, one_f = _get(g, "frames", "single", "tether"), _get(g, "frames", "single", "floor")
    if many_t and many_f and many_t.get("frames_per_commit") and many_f.get("frames_per_commit"):
        tb, fb = many_t.get("by_object") or {}, many_f.get("by_object") or {}
        objs = "; ".join(x for x in (_per(tb, "tether_nodes"), _per(tb, "tether_nodes_id")) if x)
        fobjs = "; ".join(
            x for x in (_per(fb, "messages"), _per(fb, "sqlite_autoindex_messages_1")) if x
        )
        single = ""
        if one_t and one_f and one_t.get("frames_per_commit") and one_f.get("frames_per_commit"):
            ids = _per(one_t.get("by_object") or {}, "tether_nodes_id")
            single = (
                f", and {one_t['frames_per_commit']:.2f} against {one_f['frames_per_commit']:.2f} "
                "on one thread" + (f" ({ids})" if ids else "")
            )
        out.append(
            f"**Pages written per commit** (WAL frames, counted): with {m.get('threads', '?')} "
            f"threads round-robin tether writes {many_t['frames_per_commit']:.2f} against the "
            f"floor's {many_f['frames_per_commit']:.2f}"
            + (f" ({objs}; the floor's {fobjs})" if objs and fobjs else "")
            + single
            + ". A node's row key is its scope's id << 32 | its sequence, so a thread's "
            "nodes sit together and a turn of one thread among many inserts in the middle of "
            "`tether_nodes`: when the leaf there is full, SQLite rebalances it with up to two "
            "siblings and rewrites their parent, where the floor's rows append at the end of "
            "its rowid table (only its (thread, seq) index is written mid-tree); "
            "`tether_nodes_id` indexes content ids, which are hashes, so each insert lands "
            "on a random leaf"
        )
    st, sf = _get(one_t, "statements_per_turn"), _get(one_f, "statements_per_turn")
    if st and sf:
        kw = ", ".join(f"{v:g} {k}" for k, v in (one_t.get("statements_by_keyword") or {}).items())
        shapes = " ".join(one_t.get("statements") or {})
        selects = (
            "; the SELECT reads the thread's head before the turn, and the INSERT writes "
            "both nodes only if that head has not moved (optimistic concurrency, checked "
            "in its own WHERE) and commits itself: no BEGIN, no COMMIT"
            if (one_t.get("statements_by_keyword") or {}) == {"SELECT": 1, "INSERT": 1}
            and "SELECT k, id, frontier" in shapes
            else ""
        )
        out.append(
            f"**SQL statements per turn** (traced, counted): tether {st:g} against the "
            f"floor's {sf:g}: {kw}{selects}"
        )
    cpu_bits = []
    for sync, what in (("NORMAL", "synchronous=NORMAL, no fsync"), ("FULL", "FULL")):
        for w in ("many", "single"):
            d = _get(g, "cpu", sync, w)
            tc, rc = _get(d, "tether", "cpu_us"), _get(d, "tether_replay", "cpu_us")
            fc, frc = _get(d, "floor", "cpu_us"), _get(d, "floor_replay", "cpu_us")
            if tc is None or rc is None or fc is None or _get(d, "tether_python_us") is None:
                continue  # no replay, or one that missed statements: no split to state
            where = f"{m.get('threads', '?')} threads" if w == "many" else "one thread"
            cpu_bits.append(
                f"{what}, {where}: tether {tc:.0f} us (SQLite {rc:.0f}, Python {tc - rc:.0f}) "
                f"against {fc:.0f} us"
                + (f" (replayed the same way: {frc:.0f})" if frc is not None else "")
            )
    if cpu_bits:
        out.append(
            f"**CPU time per turn** (process time, {_least_of(m.get('repeats'))}; SQLite's "
            "part is tether's own recorded statements replayed through the bare sqlite3 "
            "module on an identical file, with the kernel's share of each fsync at FULL; "
            "Python's is the rest: the Transaction, building and hashing the nodes, the "
            "store's own code; the floor's turn is only its SQL, so its replay, in "
            "brackets, checks the method): " + "; ".join(cpu_bits)
        )
    ld = g.get("load") or {}

    def ms(*path: str) -> str | None:
        wall = _get(ld, *path, "open_ms" if path[0].endswith("_open") else "read_ms")
        cpu = _get(ld, *path, "open_cpu_ms" if path[0].endswith("_open") else "read_cpu_ms")
        if wall is None:
            return None
        return f"{wall:.2f} ms" + (f" ({cpu:.2f} CPU)" if cpu is not None else "")

    to, fo, tn, ts, fr = (
        ms("tether_open"),
        ms("floor_open"),
        ms("tether_nodes"),
        ms("tether_sql"),
        ms("floor"),
    )
    dec, dec_cpu, tp = ld.get("decode_ms"), ld.get("decode_cpu_ms"), ms("tether_payloads")
    gc_t = _get(ld, "tether_nodes", "read_gc_collections")
    gc_f = _get(ld, "floor", "read_gc_collections")
    if None not in (to, fo, tn, ts, fr, dec):
        out.append(
            f"**Cold load** of {ld.get('messages', 0):,} messages in a fresh process (wall, "
            f"{_median_of(m.get('load_runs'))}; CPU time in brackets): opening the store "
            f"{to} against {fo}; reading with `store.nodes` {tn}, of which its SQL (seven "
            f"columns, stepped by sqlite3, nothing decoded) {ts} and decoding the rows into "
            f"`CausalNode`s {dec:.2f} ms"
            + (f" ({dec_cpu:.2f} CPU)" if dec_cpu is not None else "")
            + f", against the floor's SELECT {fr}"
            + (
                f"; `store.payloads` (three columns, what TetherSession reads) {tp}"
                if tp is not None
                else ""
            )
            + (
                f"; the garbage collector ran {gc_t} times during `store.nodes`' read, "
                f"{gc_f} during the floor's"
                if gc_t is not None and gc_f is not None
                else ""
            )
        )
    return out


def section(results: dict[str, Any]) -> list[str]:
    """Markdown lines: the findings grouped by tether system and peer, then the floor."""
    turns = results["meta"]["workload"]["turns"]
    found = findings(results)
    bound = langgraph_bound(results.get("langgraph_replay"))
    bound += cold_bound(results.get("langgraph_cold"))
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
                f"  - {f['label'].split(' at ')[0]}: "
                f"{_why(f['key'], f['tether'], f['peer'], turns, bool(bound))}."
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
    lines += bound
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
