"""Reading SQLite's statement trace (``Connection.set_trace_callback``) as counts.

Python's trace callback expands every report to its statement's SQL, and SQLite also
reports each trigger program a statement runs (a file before tether's schema 3 had
``tether_nodes_head``, once per inserted resource row), so such a statement comes
through again, identical, right after itself. No workload here runs one statement
twice in a row (every insert carries new keys or ids), so a repeat in a row is a
trigger's report.
"""

from __future__ import annotations

_DML = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def untriggered(traced: list[str]) -> list[str]:
    """The traced statements less the trigger programs' reports."""
    out: list[str] = []
    for sql in traced:
        if not out or sql != out[-1]:
            out.append(sql)
    return out


def commits(stmts: list[str]) -> int:
    """Commits among statements (``untriggered``): each COMMIT (or END), and each data
    change made outside BEGIN ... COMMIT, which SQLite commits on its own (autocommit
    mode: tether's common commit is one such INSERT)."""
    n = 0
    in_txn = False
    for sql in stmts:
        word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if word == "BEGIN":
            in_txn = True
        elif word in ("COMMIT", "END", "ROLLBACK"):
            n += word != "ROLLBACK"
            in_txn = False
        elif word in _DML and not in_txn:
            n += 1
    return n
