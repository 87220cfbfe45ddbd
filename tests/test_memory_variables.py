"""Variables: the coercion table, scopes and their isolation, history, deletes, atomic commits."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import Conflict, InvalidRequest, Transaction
from tether.core import scopes
from tether.projections import (
    UnknownVariable,
    UnstorableValue,
    VarDecl,
    Variables,
    coerce,
    read_value,
    to_csv_text,
)
from tether.store.in_memory import MemoryStore

pd: Any = pytest.importorskip("pandas")  # the dataframe extra


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


# -- the coercion table (seed 004) ---------------------------------------------------------

COERCIBLE: list[tuple[str, Any, Any]] = [
    ("string", "hi", "hi"),
    ("string", 1, "1"),
    ("string", 2.5, "2.5"),
    ("string", True, "true"),
    ("string", {"a": [1]}, '{"a":[1]}'),
    ("integer", "1", 1),
    ("integer", " 42 ", 42),
    ("integer", "-7", -7),
    ("integer", "1.0", 1),
    ("integer", "1e3", 1000),
    ("integer", 3.0, 3),
    ("integer", True, 1),
    ("integer", 5, 5),
    ("float", "2.5", 2.5),
    ("float", "7", 7.0),
    ("float", "1e-3", 0.001),
    ("float", 3, 3.0),
    ("float", False, 0.0),
    ("boolean", "true", True),
    ("boolean", "FALSE", False),
    ("boolean", "yes", True),
    ("boolean", "off", False),
    ("boolean", "1", True),
    ("boolean", 0, False),
    ("boolean", True, True),
    ("json", '{"a": 1}', {"a": 1}),
    ("json", "[1, 2]", [1, 2]),
    ("json", '"text"', "text"),
    ("json", "3", 3),
    ("json", {"k": (1, 2)}, {"k": [1, 2]}),
    ("json", None, None),
    ("csv", "a,b\n1,2\n", [["a", "b"], ["1", "2"]]),
    ("csv", 'name,note\nAda,"x, y"\n', [["name", "note"], ["Ada", "x, y"]]),
    (
        "csv",
        [{"a": 1, "b": None}, {"a": 2, "c": True}],
        [["a", "b", "c"], ["1", "", ""], ["2", "", "true"]],
    ),
    ("csv", [["h"], [1]], [["h"], ["1"]]),
    ("csv", "", []),
    ("dataframe", "a,b\n1,x\n2,\n", {"columns": ["a", "b"], "data": [[1, "x"], [2, None]]}),
    ("dataframe", "p\n1.5\n2\n", {"columns": ["p"], "data": [[1.5], [2.0]]}),
    ("dataframe", [{"a": 1}, {"a": 2}], {"columns": ["a"], "data": [[1], [2]]}),
    (
        "dataframe",
        {"a": [1, 2], "b": ["x", "y"]},
        {"columns": ["a", "b"], "data": [[1, "x"], [2, "y"]]},
    ),
    ("dataframe", [["a", "b"], [1, 2]], {"columns": ["a", "b"], "data": [[1, 2]]}),
    ("dataframe", {"columns": ["a"], "data": [[1]]}, {"columns": ["a"], "data": [[1]]}),
    ("dataframe", [], {"columns": [], "data": []}),
]

UNCOERCIBLE: list[tuple[str, Any]] = [
    ("string", None),
    ("integer", "abc"),
    ("integer", "2.5"),
    ("integer", 2.5),
    ("integer", 2**60),
    ("integer", [1]),
    ("integer", None),
    ("float", "abc"),
    ("float", "nan"),
    ("float", "inf"),
    ("float", None),
    ("boolean", "maybe"),
    ("boolean", 2),
    ("boolean", None),
    ("json", "hello"),
    ("json", '{"a": 1'),
    ("csv", 'a,"b'),
    ("csv", 42),
    ("csv", {"a": 1}),
    ("dataframe", "a,b\n1\n"),
    ("dataframe", {"a": [1, 2], "b": [1]}),
    ("dataframe", [["a", "a"], [1, 2]]),
    ("dataframe", 42),
    ("dataframe", None),
]


@pytest.mark.parametrize(("type_", "given", "expected"), COERCIBLE)
def test_coercion_table(type_: str, given: Any, expected: Any) -> None:
    value, ok, error = coerce(type_, given)
    assert (value, ok, error) == (expected, True, None)
    assert type(value) is type(expected)


@pytest.mark.parametrize(("type_", "given"), UNCOERCIBLE)
def test_uncoercible_values_are_kept_as_given_with_a_reason(type_: str, given: Any) -> None:
    value, ok, error = coerce(type_, given)
    assert ok is False
    assert isinstance(error, str) and error
    assert value == given


def test_dataframes_coerce_from_pandas_and_read_back_as_pandas() -> None:
    df = pd.DataFrame(
        {
            "city": ["Oslo", "Rome"],
            "temp": [3, 18.5],
            "when": pd.to_datetime(["2024-01-01", "2024-06-01"]),
        }
    )
    stored, ok, _ = coerce("dataframe", df)
    assert ok and stored["columns"] == ["city", "temp", "when"]
    assert stored["data"][0][:2] == ["Oslo", 3.0]
    back = read_value("dataframe", stored)
    assert isinstance(back, pd.DataFrame)
    assert list(back.columns) == ["city", "temp", "when"] and back["temp"].tolist() == [3.0, 18.5]
    assert coerce("csv", df)[0][0] == ["city", "temp", "when"]
    assert coerce("string", pd.DataFrame({"a": [1]}))[0] == "a\n1\n"
    assert coerce("json", pd.DataFrame({"a": [1, None]}))[0] == [{"a": 1.0}, {"a": None}]


def test_dataframes_read_back_as_records_without_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    assert read_value("dataframe", {"columns": ["a", "b"], "data": [[1, "x"]]}) == [
        {"a": 1, "b": "x"}
    ]


@given(
    st.lists(
        st.lists(
            st.text(
                alphabet=st.characters(codec="utf-8", exclude_characters="\x00\r"),
                max_size=8,
            ),
            min_size=1,
            max_size=4,
        ),
        max_size=6,
    )
)
def test_csv_rows_round_trip_through_text(rows: list[list[str]]) -> None:
    text = to_csv_text(rows)
    back, ok, _ = coerce("csv", text)
    assert ok
    assert back == rows
    assert to_csv_text(back) == text


def test_csv_text_round_trips_exactly() -> None:
    text = 'a,b\n1,"x, y"\n3,"say ""hi"""\n'
    rows, ok, _ = coerce("csv", text)
    assert ok and to_csv_text(rows) == text


def test_unknown_type_is_a_typed_error() -> None:
    with pytest.raises(InvalidRequest) as e:
        coerce("date", "2024")
    assert e.value.details["field"] == "type"


# -- declarations ----------------------------------------------------------------------------


def test_declarations_validate_and_coerce_defaults() -> None:
    assert VarDecl(name="n", type="integer", default="5").default == 5
    d = VarDecl(name="t", type="dataframe", scope="user", default=[{"a": 1}])
    assert VarDecl.from_dict(d.to_dict()) == d
    for kw, field in [
        ({"name": "1x", "type": "string"}, "name"),
        ({"name": "x", "type": "date"}, "type"),
        ({"name": "x", "type": "string", "scope": "galaxy"}, "scope"),
        ({"name": "x", "type": "integer", "default": "many"}, "default"),
    ]:
        with pytest.raises(InvalidRequest) as e:
            VarDecl(**kw)
        assert e.value.details["field"] == field
    with pytest.raises(TypeError):
        VarDecl("x", "string")  # type: ignore[call-arg]  # keyword-only


# -- reads and writes ------------------------------------------------------------------------


async def test_write_coerces_and_reports(store: MemoryStore, ns: str) -> None:
    v = Variables(store, ns, [VarDecl(name="count", type="integer", default=0)], thread="t1")
    assert await v.get("count") == 0
    r = await v.set("count", "1")
    assert (r.value, r.coerced, r.error) == (1, True, None)
    assert await v.get("count") == 1
    bad = await v.set("count", "lots")
    assert bad.coerced is False and "integer" in (bad.error or "")
    assert await v.get("count") == "lots"  # stored as given
    node = await store.resource_head(ns, scopes.thread("t1"), "var:count")
    assert node is not None and node.kind == "resource"
    assert node.payload == {
        "name": "count",
        "type": "integer",
        "value": "lots",
        "coerced": False,
        "error": bad.error,
    }


async def test_unstorable_values_raise_and_write_nothing(store: MemoryStore, ns: str) -> None:
    v = Variables(
        store, ns, [VarDecl(name="x", type="float"), VarDecl(name="j", type="json")], thread="t1"
    )
    with pytest.raises(UnstorableValue) as e:
        await v.set("x", float("nan"))
    assert e.value.code == "unstorable_value"
    with pytest.raises(UnstorableValue):
        await v.set("j", object())
    assert (await store.head(ns, scopes.thread("t1"))).sequence == 0


async def test_unknown_variables_are_typed_errors(store: MemoryStore, ns: str) -> None:
    v = Variables(store, ns, [VarDecl(name="a", type="string")], thread="t1")
    with pytest.raises(UnknownVariable) as e:
        await v.get("b")
    assert e.value.code == "unknown_variable"
    with pytest.raises(InvalidRequest):
        Variables(store, ns, [VarDecl(name="a", type="string")] * 2)
    u = Variables(store, ns, [VarDecl(name="p", type="string", scope="user")], thread="t1")
    with pytest.raises(InvalidRequest) as e2:
        await u.get("p")
    assert e2.value.details["field"] == "user"


async def test_delete_and_history(store: MemoryStore, ns: str) -> None:
    v = Variables(store, ns, [VarDecl(name="s", type="string", default="none")], thread="t1")
    await v.set("s", "a")
    await v.set("s", 2)
    await v.delete("s")
    assert await v.get("s") == "none"
    await v.set("s", None)  # uncoercible: kept as given
    h = await v.history("s")
    assert [(x.value, x.coerced, x.deleted) for x in h] == [
        ("a", True, False),
        ("2", True, False),
        (None, False, True),
        (None, False, False),
    ]
    assert [x.sequence for x in h] == sorted(x.sequence for x in h)
    assert h[-1].error and h[-1].to_dict()["error"] == h[-1].error
    assert [x.to_dict()["value"] for x in h] == ["a", "2", None, None]


async def test_dataframe_variable_reads_as_a_dataframe(store: MemoryStore, ns: str) -> None:
    v = Variables(store, ns, [VarDecl(name="t", type="dataframe")], thread="t1")
    r = await v.set("t", "a,b\n1,2\n3,4\n")
    assert isinstance(r.value, pd.DataFrame) and r.value["b"].tolist() == [2, 4]
    got = await v.get("t")
    assert isinstance(got, pd.DataFrame) and got.equals(r.value)
    assert (await v.all())["t"].shape == (2, 2)
    (version,) = await v.history("t")
    assert isinstance(version.value, pd.DataFrame)
    assert version.to_dict()["value"] == {"columns": ["a", "b"], "data": [[1, 2], [3, 4]]}


# -- scopes and isolation --------------------------------------------------------------------

DECLS = [
    VarDecl(name="app_v", type="integer", scope="app", default=0),
    VarDecl(name="user_v", type="string", scope="user", default="-"),
    VarDecl(name="thread_v", type="integer", scope="thread", default=0),
    VarDecl(name="run_v", type="json", scope="run", default=[]),
    VarDecl(name="call_v", type="boolean", scope="call", default=False),
]


async def test_scopes_and_their_isolation(store: MemoryStore, ns: str) -> None:
    alice_t1 = Variables(store, ns, DECLS, user="alice", thread="t1", run="run_1")
    bob_t2 = Variables(store, ns, DECLS, user="bob", thread="t2", run="run_1")
    await alice_t1.update({"app_v": 7, "user_v": "A", "thread_v": 1, "run_v": [1], "call_v": "yes"})
    assert await alice_t1.all() == {
        "app_v": 7,
        "user_v": "A",
        "thread_v": 1,
        "run_v": [1],
        "call_v": True,
    }
    # another user on another thread: only app is shared
    assert await bob_t2.all() == {
        "app_v": 7,
        "user_v": "-",
        "thread_v": 0,
        "run_v": [],
        "call_v": False,
    }
    # same user, other thread: user is shared, thread is not
    alice_t2 = Variables(store, ns, DECLS, user="alice", thread="t2")
    assert await alice_t2.get("user_v") == "A"
    assert await alice_t2.get("thread_v") == 0
    # same thread, a later run: the run variable is invisible, the thread variable is there
    later = Variables(store, ns, DECLS, user="alice", thread="t1", run="run_2")
    assert await later.get("run_v") == [] and await later.get("thread_v") == 1
    # the call scope lives in the object only: never persisted
    assert await later.get("call_v") is False
    assert (await alice_t1.history("call_v"))[-1].value is True
    for scope in ("app", "user:alice", "thread:t1"):
        heads = await store.resource_heads(ns, scope)
        assert not any("call_v" in k for k in heads)
    # other namespaces see nothing
    assert (
        await Variables(store, ns + "x", DECLS, user="alice", thread="t1", run="run_1").get("app_v")
        == 0
    )


async def test_run_alone_serves_as_the_thread(store: MemoryStore, ns: str) -> None:
    v = Variables(store, ns, [VarDecl(name="x", type="integer")], run="run_9")
    await v.set("x", 3)
    assert (
        await Variables(store, ns, [VarDecl(name="x", type="integer")], thread="run_9").get("x")
        == 3
    )


async def test_one_commit_spans_scopes_atomically(store: MemoryStore, ns: str) -> None:
    v = Variables(store, ns, DECLS, user="alice", thread="t1", run="run_1")
    txn = Transaction(store, ns)
    await txn.append(
        scopes.thread("t1"), "goal", {"run": "run_1", "input": "hi", "llm": "agent", "metadata": {}}
    )
    await v.set("user_v", "from a turn", txn=txn)
    await v.set("app_v", "9", txn=txn)
    await v.set("run_v", '{"k": 1}', txn=txn)
    # Staged, not committed: the store shows nothing yet, the transaction does.
    assert await v.get("user_v") == "-"
    assert await v.get("user_v", txn=txn) == "from a turn"
    # Another writer moves the user scope: the whole commit fails and writes nothing.
    await Variables(store, ns, DECLS, user="alice").set("user_v", "concurrent")
    with pytest.raises(Conflict):
        await txn.commit()
    assert (await store.head(ns, scopes.thread("t1"))).sequence == 0
    assert (await store.head(ns, "app")).sequence == 0
    assert await v.get("user_v") == "concurrent"
    # Retried on fresh heads, all three scopes land together.
    txn2 = Transaction(store, ns)
    await v.update({"user_v": "again", "app_v": 10, "thread_v": 2}, txn=txn2)
    written = await txn2.commit()
    assert set(written) == {"user:alice", "app", "thread:t1"}
    assert await v.all() == {
        "app_v": 10,
        "user_v": "again",
        "thread_v": 2,
        "run_v": [],
        "call_v": False,
    }
