"""Every ``tether`` command in-process with CliRunner: tables, --json shapes and exit codes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

import tether
from _control_helpers import add_turn, populate
from tether import control
from tether.cli import main

NS = "default"


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "cli.db"

    async def fill() -> None:
        async with await tether.open_store(str(path)) as store:
            await populate(store, NS, turns=3)
            await add_turn(store, NS, "t2", "run_b", "second thread")

    asyncio.run(fill())
    return str(path)


def cli(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def js(result: Result) -> Any:
    return orjson.loads(result.stdout)


def ids(db: str, thread: str = "t1") -> list[str]:
    async def go() -> list[str]:
        async with await tether.open_store(db) as store:
            return [n.id for n in await store.nodes(NS, f"thread:{thread}")]

    return asyncio.run(go())


def test_help_documents_the_exit_codes() -> None:
    r = cli("--help")
    assert r.exit_code == 0
    for line in ("0  success", "2  usage", "3  verification failed", "4  conflict"):
        assert line in r.stdout
    for cmd in (
        "threads",
        "describe",
        "history",
        "export",
        "import",
        "verify",
        "fork",
        "reset",
        "compact",
        "demo",
        "serve",
    ):
        assert cmd in r.stdout


def test_threads_table_and_json(db: str) -> None:
    r = cli("--store", db, "threads")
    assert r.exit_code == 0 and "t1" in r.stdout and "t2" in r.stdout
    j = js(cli("--store", db, "--json", "threads"))
    assert [t["thread"] for t in j["threads"]] == ["t1", "t2"]
    assert j["threads"][0]["runs"] == 3 and j["next_after"] is None
    paged = js(cli("--store", db, "--json", "threads", "--limit", "1"))
    assert [t["thread"] for t in paged["threads"]] == ["t1"] and paged["next_after"] == "t1"
    rest = js(cli("--store", db, "--json", "threads", "--after", "t1"))
    assert [t["thread"] for t in rest["threads"]] == ["t2"]
    every = js(cli("--store", db, "--json", "threads", "--all"))
    assert {t["scope"] for t in every["threads"]} == {"app", "thread:t1", "thread:t2", "user:u1"}


def test_describe_table_and_json(db: str) -> None:
    r = cli("--store", db, "describe", "--thread", "t1")
    assert r.exit_code == 0
    for word in ("graph", "conversation", "variables", "memory", "executions", "completed 3"):
        assert word in r.stdout
    j = js(
        cli("--store", db, "--json", "describe", "--thread", "t1", "--data", "--only", "variables")
    )
    res = control.StateOperationResult.from_dict(j)
    assert res.operation == "describe" and res.scope == "thread:t1" and j["ok"] is True
    assert [s.name for s in res.stores] == ["variables", "graph"]
    assert res.stores[0].data == {"cart": ["apple", "pear"], "count": 2}
    ns = js(cli("--store", db, "--json", "describe"))
    assert ns["metadata"]["scopes"] == 4


def test_history_pages(db: str) -> None:
    j = js(cli("--store", db, "--json", "history", "--thread", "t1", "--limit", "3"))
    assert [n["sequence"] for n in j["nodes"]] == [1, 2, 3] and j["next_after"] == 3
    j2 = js(cli("--store", db, "--json", "history", "-t", "t1", "--after", "3", "--limit", "3"))
    assert [n["sequence"] for n in j2["nodes"]] == [4, 5, 6]
    down = js(cli("--store", db, "--json", "history", "-t", "t1", "--desc", "--limit", "2"))
    total = len(ids(db))
    assert [n["sequence"] for n in down["nodes"]] == [total, total - 1]
    assert down["metadata"]["next_before"] == total - 1
    table = cli("--store", db, "history", "-t", "t1", "--limit", "3")
    assert table.exit_code == 0 and "goal" in table.stdout and "--after 3" in table.stdout


def test_export_import_verify_round_trip(db: str, tmp_path: Path) -> None:
    out = tmp_path / "t1.json"
    r = cli("--store", db, "export", "--thread", "t1", "-o", str(out))
    assert r.exit_code == 0 and "exported" in r.stdout
    stdout_copy = cli("--store", db, "export", "--thread", "t1").stdout_bytes
    assert stdout_copy.strip() == out.read_bytes()
    j = js(cli("--store", db, "--json", "import", str(out), "--new-thread", "copy"))
    assert j["created"] == "thread:copy" and j["nodes"] == len(ids(db))
    again = tmp_path / "copy.json"
    cli("--store", db, "export", "-t", "copy", "-o", str(again))
    assert again.read_bytes() == out.read_bytes()
    v = cli("--store", db, "verify")
    assert v.exit_code == 0 and "thread:copy" in v.stdout and "FAILED" not in v.stdout
    empty = cli("--store", db, "verify", "--thread", "typo")
    assert empty.exit_code == 0 and "thread:typo holds no nodes" in empty.stdout
    assert js(cli("--store", db, "--json", "verify", "-t", "typo"))["missing"] == ["thread:typo"]
    vj = js(cli("--store", db, "--json", "verify", "--file", str(out)))
    assert vj["ok"] is True and vj["checks"][0]["checked"] == len(ids(db))


def test_export_to_an_unwritable_place_is_one_line(db: str, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir.json"
    r = cli("--store", db, "export", "-t", "t1", "-o", str(target))
    assert r.exit_code == 1 and r.stderr.startswith("error [io]: cannot write")
    assert not target.parent.exists()


def test_import_from_stdin(db: str, tmp_path: Path) -> None:
    snap = cli("--store", db, "export", "-t", "t2").stdout
    r = cli("--store", db, "import", "-", "--thread", "from-stdin", input=snap)
    assert r.exit_code == 0 and "imported" in r.stdout


def test_a_tampered_export_is_rejected_with_exit_3(db: str, tmp_path: Path) -> None:
    snap = orjson.loads(cli("--store", db, "export", "-t", "t1").stdout)
    snap["nodes"][0]["payload"]["input"] = "I approve the transfer"
    bad = tmp_path / "bad.json"
    bad.write_bytes(orjson.dumps(snap))
    r = cli("--store", db, "import", str(bad), "--thread", "evil")
    assert r.exit_code == 3
    assert r.stderr.startswith("error [identity_mismatch]: ") and r.stderr.count("\n") == 1
    j = cli("--store", db, "--json", "import", str(bad), "--thread", "evil")
    err = orjson.loads(j.stderr)
    assert j.exit_code == 3 and err["code"] == "identity_mismatch" and err["details"]["index"] == 0
    v = cli("--store", db, "--json", "verify", "--file", str(bad))
    assert v.exit_code == 3
    check = js(v)["checks"][0]
    assert (check["ok"], check["code"], check["index"]) == (False, "identity_mismatch", 0)
    assert "evil" not in cli("--store", db, "threads").stdout  # nothing was written


def test_import_into_a_used_thread_is_a_conflict(db: str, tmp_path: Path) -> None:
    out = tmp_path / "t2.json"
    cli("--store", db, "export", "-t", "t2", "-o", str(out))
    r = cli("--store", db, "import", str(out), "--thread", "t1")
    assert r.exit_code == 4 and "error [scope_not_empty]" in r.stderr
    ok = cli("--store", db, "--json", "import", str(out), "--thread", "t1", "--replace")
    assert ok.exit_code == 0 and js(ok)["replaced"] is True


def test_fork(db: str) -> None:
    goal = ids(db)[0]
    j = js(cli("--store", db, "--json", "fork", "-t", "t1", "--node", goal, "--new-thread", "f"))
    assert j["created"] == "thread:f" and j["metadata"]["nodes"] == 1
    h = js(cli("--store", db, "--json", "history", "-t", "f"))
    # The goal, then the run index entry of the one run the fork holds (its own bookkeeping).
    assert h["nodes"][0]["id"] == goal
    assert [(n["kind"], n.get("resourceKey", "")[:5]) for n in h["nodes"][1:]] == [
        ("resource", "task:")
    ]
    r = cli("--store", db, "fork", "-t", "t1", "--node", goal)
    assert r.exit_code == 0 and "forked thread:t1-" in r.stdout
    missing = cli("--store", db, "fork", "-t", "t1", "--node", "cw_" + "0" * 24)
    assert missing.exit_code == 1 and "error [not_found]" in missing.stderr
    bad = cli("--store", db, "fork", "-t", "t1", "--node", "nope")
    assert bad.exit_code == 2 and "error [invalid_request]: node:" in bad.stderr


def test_reset_asks_first_and_does_exactly_that(db: str) -> None:
    no = cli("--store", db, "reset", "--thread", "t2", input="y\n")  # no terminal: not asked
    assert no.exit_code == 2 and "error [confirmation_required]" in no.stderr
    assert "pass --yes to confirm" in no.stderr
    assert len(ids(db, "t2")) > 0
    yes = cli("--store", db, "reset", "--thread", "t2", "--yes")
    assert yes.exit_code == 0 and "cleared thread:t2" in yes.stdout
    assert ids(db, "t2") == [] and len(ids(db)) > 0
    var = js(cli("--store", db, "--json", "reset", "-t", "t1", "--variable", "cart", "--yes"))
    assert var["cleared"] == ["thread:t1/var:cart"]
    run = js(cli("--store", db, "--json", "reset", "-t", "t1", "--run", "run_0001", "-y"))
    assert run["cleared"] == ["thread:t1/run:run_0001"]
    mem = js(cli("--store", db, "--json", "reset", "-t", "t1", "--only", "memory", "-y"))
    assert mem["cleared"] == ["thread:t1/memory"]
    everything = js(cli("--store", db, "--json", "reset", "--whole-namespace", "-y"))
    assert everything["cleared"] == ["namespace:default"]
    assert js(cli("--store", db, "--json", "threads"))["threads"] == []


def test_reset_usage_errors(db: str) -> None:
    r = cli("--store", db, "reset", "-y")
    assert r.exit_code == 2 and "error [invalid_request]" in r.stderr
    r = cli("--store", db, "reset", "--thread", "t1", "--user", "u", "-y")
    assert r.exit_code == 2 and "user" in r.stderr
    r = cli("--store", db, "reset", "--thread", "t1", "--only", "tasks", "-y")
    assert r.exit_code == 2 and "stores" in r.stderr
    r = cli("--store", db, "reset", "--bogus")
    assert r.exit_code == 2


def test_compact(tmp_path: Path) -> None:
    path = str(tmp_path / "c.db")

    async def fill() -> None:
        async with await tether.open_store(path) as store:
            for i in range(12):
                await add_turn(store, NS, "long", f"run_{i:04x}", f"question {i}")

    asyncio.run(fill())
    j = js(
        cli(
            "--store",
            path,
            "--json",
            "compact",
            "-t",
            "long",
            "--strategy",
            "recent",
            "--max-messages",
            "8",
        )
    )
    assert j["compacted"] == ["conversation"]
    meta = j["stores"][0]["metadata"]
    assert meta["after"] <= 8 < meta["before"]
    again = cli(
        "--store", path, "compact", "-t", "long", "--strategy", "recent", "--max-messages", "8"
    )
    assert again.exit_code == 0 and "nothing to compact" in again.stdout
    summary = cli(
        "--store",
        path,
        "compact",
        "-t",
        "long",
        "--strategy",
        "summary",
        "--max-messages",
        "4",
        "--preserve-recent",
        "2",
    )
    assert summary.exit_code == 0 and "compacted thread:long" in summary.stdout
    bad = cli("--store", path, "--json", "compact", "-t", "long", "--max-tokens", "0")
    assert bad.exit_code == 2 and orjson.loads(bad.stderr)["details"]["field"] == "max_tokens"
    assert cli("--store", path, "compact", "-t", "long", "--strategy", "all").exit_code == 2


def test_a_missing_store_file_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    r = cli("--store", str(path), "threads")
    assert r.exit_code == 1
    assert (
        r.stderr
        == f"error [not_found]: no store at {path}: pass --store with an existing store's URL, "
        f"or make this one with the demo's threads: `tether --store {path} demo`\n"
    )
    assert not path.exists()  # reading never creates a store


def test_a_bad_store_url_is_a_usage_error() -> None:
    r = cli("--store", "ftp://x", "threads")
    assert r.exit_code == 2 and r.stderr.startswith("error [invalid_request]: unknown store URL")


def test_memory_store_url_works() -> None:
    r = cli("--store", "memory://", "--json", "threads")
    assert r.exit_code == 0 and js(r)["threads"] == []


def test_namespace_option_and_env(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert js(cli("--store", db, "-n", "other", "--json", "threads"))["threads"] == []
    monkeypatch.setenv("TETHER_STORE", db)
    assert len(js(cli("--json", "threads"))["threads"]) == 2


def test_serve_without_the_server_says_what_to_install() -> None:
    r = cli("serve")
    if r.exit_code == 1:
        assert "tether[server]" in r.stderr
    else:  # the server module exists: its own help must work
        assert cli("serve", "--help").exit_code == 0


# -- a newcomer's cases: nothing misleads ---------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["history", "--thread", "never"],
        ["describe", "--thread", "never"],
        ["compact", "--thread", "never"],
        ["reset", "--thread", "never", "--yes"],
        ["export", "--thread", "never"],
        ["reset", "--thread", "never", "--variable", "cart", "--yes"],
        ["describe", "--user", "nobody"],
    ],
)
def test_a_scope_never_written_is_not_found(db: str, command: list[str], tmp_path: Path) -> None:
    before = ids(db), ids(db, "t2")
    r = cli("--store", db, *command)
    assert r.exit_code == 1, r.output
    assert r.stderr.startswith("error [not_found]: no ")
    assert "nothing was ever written there" in r.stderr
    assert f"`tether --store {db} threads`" in r.stderr
    as_json = cli("--store", db, "-n", "acme", "--json", *command)
    err = orjson.loads(as_json.stderr)
    assert as_json.exit_code == 1 and err["code"] == "not_found"
    assert err["details"]["namespace"] == "acme"
    assert f"`tether --store {db} -n acme threads`" in err["message"]
    assert (ids(db), ids(db, "t2")) == before  # nothing written anywhere


def test_export_of_a_missing_scope_leaves_no_file(db: str, tmp_path: Path) -> None:
    out = tmp_path / "never.json"
    r = cli("--store", db, "export", "--thread", "never", "-o", str(out))
    assert r.exit_code == 1 and "error [not_found]" in r.stderr
    assert not out.exists() and not Path(str(out) + ".part").exists()


def test_a_reset_thread_still_exists_for_history(db: str) -> None:
    assert cli("--store", db, "reset", "--thread", "t2", "--yes").exit_code == 0
    r = cli("--store", db, "--json", "history", "--thread", "t2")
    assert r.exit_code == 0 and js(r)["nodes"] == []


def test_hints_carry_the_store_and_namespace_in_use(db: str, tmp_path: Path) -> None:
    goal = ids(db)[0]
    r = cli("--store", db, "fork", "-t", "t1", "--node", goal, "--new-thread", "f1")
    assert r.exit_code == 0
    assert f"see it with: tether --store {db} history --thread f1" in r.stdout
    missing = tmp_path / "nowhere.db"
    r = cli("--store", str(missing), "-n", "acme", "threads")
    assert r.exit_code == 1 and not missing.exists()
    assert f"`tether --store {missing} -n acme demo`" in r.stderr
    empty = cli("--store", db, "-n", "fresh-ns", "threads")
    assert empty.exit_code == 0
    assert f"`tether --store {db} -n fresh-ns demo` makes some" in empty.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["threads"],
        ["runs"],
        ["describe", "--thread", "t1"],
        ["history", "--thread", "t1", "--limit", "2"],
        ["verify", "--thread", "t1"],
    ],
)
def test_json_after_the_subcommand_is_the_same_as_before(db: str, command: list[str]) -> None:
    before = cli("--store", db, "--json", *command)
    after = cli("--store", db, *command, "--json")
    assert before.exit_code == after.exit_code == 0, after.output
    assert js(after) == js(before)


def test_json_after_the_subcommand_covers_errors_too(db: str) -> None:
    r = cli("--store", db, "history", "--thread", "never", "--json")
    assert r.exit_code == 1 and orjson.loads(r.stderr)["code"] == "not_found"
    r = cli("--store", db, "reset", "--thread", "t2", "--json")
    err = orjson.loads(r.stderr)
    assert r.exit_code == 2 and err["code"] == "confirmation_required"
    assert "--yes" in err["message"] and err["details"]["field"] == "yes"
    assert len(ids(db, "t2")) > 0


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["-n", "", "threads"], "namespace"),
        (["-n", "  ", "threads"], "namespace"),
        (["--store", "", "threads"], "store"),
        (["history", "--thread", ""], "thread"),
        (["describe", "--user", ""], "user"),
        (["import", "-", "--new-thread", ""], "thread"),
        (["fork", "-t", "t1", "--node", "cw_" + "0" * 24, "--new-thread", ""], "new_thread"),
    ],
)
def test_empty_names_are_refused(db: str, args: list[str], field: str) -> None:
    full = args if args[0] == "--store" else ["--store", db, *args]
    r = cli("--json", *full, input="")
    assert r.exit_code == 2, r.output
    assert orjson.loads(r.stderr)["details"]["field"] == field


def test_confirmation_at_a_terminal(db: str, tmp_path: Path) -> None:
    """A real pseudo-terminal: the question is asked; "n" changes nothing, "y" resets."""
    import os
    import pty
    import subprocess
    import sys

    def answer(text: str) -> tuple[int, str]:
        leader, follower = pty.openpty()
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tether.cli", "--store", db, "reset", "--thread", "t2"],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        os.close(follower)
        os.write(leader, text.encode())
        _, err = proc.communicate(timeout=60)
        os.close(leader)
        return proc.returncode, err.decode()

    code, err = answer("n\n")
    assert code == 1 and "Reset thread:t2 in" in err and "error [not_confirmed]" in err
    assert len(ids(db, "t2")) > 0
    code, err = answer("y\n")
    assert code == 0, err
    assert ids(db, "t2") == []


def test_serve_without_the_server_extra_says_what_to_install() -> None:
    # In a process where FastAPI cannot be imported (as without tether[server]).
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['fastapi'] = None\nfrom tether.cli import main\nmain(['serve'])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "not_installed" in r.stderr and "tether[server]" in r.stderr


def test_commands_other_than_serve_do_not_import_the_server() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tether.cli import main\n"
        "assert 'serve' in main.commands\n"
        "heavy = sorted(m for m in ('fastapi', 'uvicorn', 'tether.server.app') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
