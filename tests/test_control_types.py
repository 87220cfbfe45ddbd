"""Control-plane request, report and result types: validation and JSON round trips."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tether
from tether.control import (
    STORES,
    STRATEGIES,
    ScopeCheck,
    StateOperationRequest,
    StateOperationResult,
    StateStoreReport,
)
from tether.control.types import OPERATIONS

ident = st.text(
    alphabet=st.characters(
        min_codepoint=33,
        max_codepoint=0x2FFF,
        # tether's names refuse what cannot be seen (tether.core.scopes.printable).
        exclude_categories=["Cc", "Cf", "Cs", "Zl", "Zp"],
    ),
    min_size=1,
    max_size=20,
)
json_leaf = st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=8)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
json_obj = st.dictionaries(st.text(max_size=6), json_value, max_size=3)
node_id = st.from_regex(r"\Acw_[0-9a-f]{24}\Z")


@st.composite
def requests(draw: st.DrawFn) -> StateOperationRequest:
    target = draw(st.sampled_from(["thread", "user", "app", "none", "whole"]))
    kw: dict[str, Any] = {}
    if target == "thread":
        kw["thread"] = draw(ident)
        kw["run"] = draw(st.none() | st.from_regex(r"\Arun_[0-9a-f]{1,12}\Z"))
    elif target == "user":
        kw["user"] = draw(ident)
    elif target == "app":
        kw["app"] = True
    elif target == "whole":
        kw["whole_namespace"] = True
    if target in ("thread", "user", "app"):
        kw["variable"] = draw(st.none() | st.from_regex(r"\A[a-z_][a-z0-9_]{0,10}\Z"))
    return StateOperationRequest(
        namespace=draw(ident),
        stores=tuple(draw(st.lists(st.sampled_from(STORES), unique=True))),
        include_data=draw(st.booleans()),
        llm=draw(ident),
        strategy=draw(st.sampled_from(STRATEGIES)),
        max_messages=draw(st.integers(1, 10**6)),
        max_tokens=draw(st.integers(1, 10**6)),
        preserve_recent=draw(st.integers(0, 1000)),
        summary_max_tokens=draw(st.integers(1, 10**5)),
        after=draw(st.integers(0, 10**9)),
        before=draw(st.none() | st.integers(1, 10**9)),
        limit=draw(st.integers(1, 10_000)),
        descending=draw(st.booleans()),
        node=draw(st.none() | node_id),
        new_thread=draw(st.none() | ident),
        snapshot=draw(st.none() | st.just({"version": 1, "nodes": [], "frontier": []})),
        replace=draw(st.booleans()),
        metadata=draw(json_obj),
        **kw,
    )


reports = st.builds(
    StateStoreReport,
    name=st.sampled_from([*STORES, "graph"]),
    scope=st.none() | st.just("thread:t1"),
    exists=st.booleans(),
    item_count=st.none() | st.integers(0, 10**6),
    message_count=st.none() | st.integers(0, 10**6),
    node_count=st.none() | st.integers(0, 10**6),
    size_bytes=st.none() | st.integers(0, 10**9),
    cleared=st.booleans(),
    compacted=st.booleans(),
    data=json_value,
    metadata=json_obj,
    error=st.none() | st.text(max_size=10),
)


@st.composite
def checks(draw: st.DrawFn) -> ScopeCheck:
    ok = draw(st.booleans())
    return ScopeCheck(
        scope=draw(st.sampled_from(["app", "thread:a", "user:b"])),
        ok=ok,
        checked=draw(st.integers(0, 100)),
        code=None if ok else draw(st.sampled_from(tether.SNAPSHOT_CODES)),
        message=None if ok else draw(st.text(max_size=10)),
        index=None if ok else draw(st.none() | st.integers(0, 100)),
        node_id=None if ok else draw(st.none() | node_id),
    )


results = st.builds(
    StateOperationResult,
    operation=st.sampled_from(OPERATIONS),
    namespace=ident,
    scope=st.none() | st.just("thread:t1"),
    stores=st.lists(reports, max_size=3).map(tuple),
    cleared=st.lists(st.text(max_size=5), max_size=3, unique=True).map(tuple),
    compacted=st.lists(st.text(max_size=5), max_size=3, unique=True).map(tuple),
    missing=st.lists(st.text(max_size=5), max_size=3, unique=True).map(tuple),
    errors=st.lists(
        st.fixed_dictionaries({"code": st.text(max_size=5), "message": st.text(max_size=5)}),
        max_size=2,
    ).map(tuple),
    nodes=st.lists(json_obj, max_size=2).map(tuple),
    next_after=st.none() | st.integers(0, 100),
    snapshot=st.none() | json_obj,
    checks=st.lists(checks(), max_size=3).map(tuple),
    created=st.none() | st.just("thread:new"),
    metadata=json_obj,
)


def _via_json(d: dict[str, Any]) -> Any:
    return orjson.loads(orjson.dumps(d))


@settings(max_examples=150)
@given(requests())
def test_request_round_trips_through_json(req: StateOperationRequest) -> None:
    again = StateOperationRequest.from_dict(_via_json(req.to_dict()))
    assert again == req
    assert again.to_dict() == req.to_dict()


@settings(max_examples=150)
@given(reports)
def test_report_round_trips_through_json(rep: StateStoreReport) -> None:
    assert StateStoreReport.from_dict(_via_json(rep.to_dict())) == rep


@settings(max_examples=100)
@given(results)
def test_result_round_trips_through_json(res: StateOperationResult) -> None:
    d = _via_json(res.to_dict())
    assert d["ok"] == (not res.errors and all(c.ok for c in res.checks))
    assert StateOperationResult.from_dict(d) == res


def test_request_defaults_are_seed_002s() -> None:
    r = StateOperationRequest.from_dict(None)
    assert (r.strategy, r.max_messages, r.max_tokens, r.preserve_recent, r.summary_max_tokens) == (
        "tokens",
        20,
        4000,
        6,
        512,
    )
    assert r.stores == () and r.include_data is False and r.metadata == {}
    assert r.scope is None


def test_seed_002_spellings_are_accepted() -> None:
    r = StateOperationRequest.from_dict(
        {"session_id": "customer-42", "stores": "conversation", "max_tokens": "8000"}
    )
    assert r.thread == "customer-42" and r.scope == "thread:customer-42"
    assert r.stores == ("conversation",)
    assert r.max_tokens == 8000


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"strategy": "everything"}, "strategy"),
        ({"max_messages": 0}, "max_messages"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"preserve_recent": -1}, "preserve_recent"),
        ({"summary_max_tokens": 0}, "summary_max_tokens"),
        ({"max_tokens": 2.5}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"max_tokens": "lots"}, "max_tokens"),
        ({"limit": 0}, "limit"),
        ({"limit": 10_001}, "limit"),
        ({"stores": ["conversation", "tasks"]}, "stores"),
        ({"stores": 3}, "stores"),
        ({"thread": ""}, "thread"),
        ({"thread": "a\nb"}, "thread"),
        ({"thread": "t", "user": "u"}, "user"),
        ({"thread": "t", "app": True}, "app"),
        ({"run": "run_1"}, "run"),
        ({"whole_namespace": True, "thread": "t"}, "whole_namespace"),
        ({"variable": "not a name"}, "variable"),
        ({"node": "cw_123"}, "node"),
        ({"namespace": ""}, "namespace"),
        ({"include_data": "yes"}, "include_data"),
        ({"metadata": {"x": float("nan")}}, "metadata"),
        ({"metadata": []}, "metadata"),
        ({"snapshot": [1, 2]}, "snapshot"),
        ({"session_id": "a", "thread": "b"}, "session_id"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_invalid_request_is_a_typed_error_naming_the_field(
    data: dict[str, Any], field: str
) -> None:
    with pytest.raises(tether.InvalidRequest) as ei:
        StateOperationRequest.from_dict(data)
    assert ei.value.code == "invalid_request"
    assert ei.value.details["field"] == field
    assert field in ei.value.message


def test_from_dict_rejects_non_objects() -> None:
    for cls in (StateOperationRequest, StateStoreReport, StateOperationResult):
        with pytest.raises(tether.InvalidRequest):
            cls.from_dict([1, 2])  # type: ignore[arg-type]


def test_result_refuses_unknown_operation_and_bad_reports() -> None:
    with pytest.raises(tether.InvalidRequest) as ei:
        StateOperationResult.from_dict({"operation": "destroy"})
    assert ei.value.details["field"] == "operation"
    with pytest.raises(tether.InvalidRequest):
        StateOperationResult.from_dict({"operation": "reset", "stores": [{"enabled": True}]})
    with pytest.raises(tether.InvalidRequest):
        StateOperationResult.from_dict({"operation": "reset", "errors": [{"message": "x"}]})


def test_a_disabled_store_cannot_report_a_mutation() -> None:
    with pytest.raises(tether.InvalidRequest) as ei:
        StateStoreReport(name="conversation", enabled=False, cleared=True)
    assert ei.value.details["field"] == "enabled"


def test_types_are_keyword_only_and_frozen() -> None:
    for cls in (StateOperationRequest, StateStoreReport, StateOperationResult, ScopeCheck):
        assert all(f.kw_only for f in dataclasses.fields(cls)), cls
    r = StateOperationRequest(thread="t")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.thread = "u"  # type: ignore[misc]


def test_metadata_is_copied_not_shared() -> None:
    meta = {"a": [1]}
    r = StateOperationRequest(metadata=meta)
    meta["a"].append(2)
    assert r.metadata == {"a": [1]}


def test_errors_pickle_with_their_field() -> None:
    import pickle

    with pytest.raises(tether.InvalidRequest) as ei:
        StateOperationRequest(limit=0)
    again = pickle.loads(pickle.dumps(ei.value))
    assert again.details["field"] == "limit" and again.code == "invalid_request"


# --------------------------------------------------------------------------- seed 002's shapes


def test_session_id_in_the_constructor_and_on_results() -> None:
    from tether.control import StateOperationRequest, StateOperationResult

    req = StateOperationRequest(session_id="customer-42", include_data=True)
    assert req.thread == "customer-42" and req.scope == "thread:customer-42"
    assert StateOperationRequest(session_id="t", thread="t").thread == "t"
    with pytest.raises(tether.InvalidRequest) as e:
        StateOperationRequest(session_id="a", thread="b")
    assert e.value.details["field"] == "session_id"
    res = StateOperationResult(operation="describe", scope="thread:customer-42")
    assert res.session_id == "customer-42" and res.to_dict()["session_id"] == "customer-42"
    assert StateOperationResult.from_dict(res.to_dict()) == res
    assert StateOperationResult(operation="describe", scope="user:ada").session_id is None


def test_from_dict_coerces_as_the_seed_does_and_errors_are_value_errors() -> None:
    from tether.control import StateOperationRequest

    req = StateOperationRequest.from_dict(
        {"session_id": "s", "stores": "conversation", "max_messages": 20.0, "max_tokens": "300"}
    )
    assert (req.stores, req.max_messages, req.max_tokens) == (("conversation",), 20, 300)
    assert type(req.max_messages) is int
    # A fraction is refused (the seed's int() would truncate it), as a ValueError too.
    for bad in ({"max_messages": 2.5}, {"strategy": "nope"}, {"preserve_recent": -1}):
        with pytest.raises(ValueError) as e:
            StateOperationRequest.from_dict(bad)
        assert isinstance(e.value, tether.InvalidRequest) and e.value.code == "invalid_request"
