"""Call scope is never persisted (issue 18, SPEC: the caller's ``context``).

A var / var_set step on a call-scoped variable stores no value in its step record:
the call that ran it holds the output (templates see it as ``nodes.<name>.output``
and the variable as ``variables.<name>``), and neither the SQLite file's bytes, an
export, describe nor history holds it afterwards. A later call cannot continue from
such a step: the run fails with a typed code (``call_scope_ended``), never goes on with
a silent ``None``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tether import control
from tether.models import ModelRequest, ModelResponse, Rule, ScriptedModel
from tether.runtime import Agent, Edge, LLMNode, Spec, VarNode, VarSetNode
from tether.store import open_store

MARK = "ctx-marker-5b1e0c7d"


def disk(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def spec(var_scope: str = "call") -> Spec:
    """keep sets the variable from the context, secret (its declaration) reads it back."""
    return Spec(
        nodes=[
            VarNode(name="secret", type="string", scope=var_scope, default="none"),
            VarSetNode(name="keep", var="secret", value="{{ context.token }}"),
            LLMNode(
                name="agent",
                system="t={{ variables.secret }} k={{ nodes.keep.output }} "
                "p={{ nodes.secret.output }}",
                input="hello",
                tools=[],
            ),
        ],
        edges=[Edge(src="keep", dst="secret"), Edge(src="secret", dst="agent")],
        start="keep",
    )


async def test_a_call_scoped_value_reaches_no_byte_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "call.db"
    store = await open_store(f"sqlite:///{path}")
    model = ScriptedModel([Rule(answer="done")])
    agent = Agent(spec(), model, store=store)
    r = await agent.step("hi", thread="t", context={"token": MARK})
    assert r.status == "completed" and r.answer == "done"
    # The call saw the value everywhere a template may name it...
    assert model.requests[0].messages[0]["content"] == f"t={MARK} k={MARK} p={MARK}"
    # ...and nothing stored holds it: not the step records, the export, describe, history.
    exported = (await control.export(store, namespace="default", thread="t")).snapshot
    assert exported is not None and exported["nodes"] and MARK not in str(exported)
    described = await control.describe(store, namespace="default", thread="t", include_data=True)
    assert MARK not in str(described.to_dict())
    history = await control.history(store, namespace="default", thread="t", limit=1000)
    assert MARK not in str(history.to_dict())
    records = [n for n in await store.nodes("default", "thread:t") if n.kind == "resource"]
    steps = [n.payload for n in records if "node" in n.payload]
    assert {p["node"] for p in steps} == {"keep", "secret"}
    assert all(p.get("call") is True and "output" not in p for p in steps), steps
    await store.close()
    assert MARK.encode() not in disk(path)


async def test_a_thread_variable_set_from_context_is_a_deliberate_write(tmp_path: Path) -> None:
    """Not call scope: the variable stores the value (the spec asked for it), the steps
    record it as before, and the raw scan above is no tautology."""
    path = tmp_path / "thread.db"
    store = await open_store(f"sqlite:///{path}")
    agent = Agent(spec("thread"), ScriptedModel([Rule(answer="done")]), store=store)
    await agent.step("hi", thread="t", context={"token": MARK})
    var = await store.resource_head("default", "thread:t", "var:secret")
    assert var is not None and var.payload["value"] == MARK
    await store.close()
    assert MARK.encode() in disk(path)


async def test_a_later_call_cannot_continue_from_a_call_scoped_step(tmp_path: Path) -> None:
    """The process stops (here: the step is cancelled) while the model is asked, right
    after the call-scoped step was committed; another call resumes the run."""
    path = tmp_path / "resume.db"
    store = await open_store(f"sqlite:///{path}")
    asked = asyncio.Event()

    class Hanging:
        async def complete(self, request: ModelRequest) -> ModelResponse:
            asked.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    stopped = asyncio.create_task(
        Agent(spec(), Hanging(), store=store).step("hi", thread="t", context={"token": MARK})
    )
    await asyncio.wait_for(asked.wait(), 30)
    stopped.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopped
    later = Agent(spec(), ScriptedModel([Rule(answer="done")]), store=store)
    r = await later.resume("t", context={"token": MARK})
    # The run fails with its typed code (as any run that cannot go on), never runs on
    # with None where the value was; the value is nowhere on disk.
    assert r.status == "failed" and r.error is not None
    assert r.error.code == "call_scope_ended", r.error
    assert "call-scoped" in r.error.message
    await store.close()
    assert MARK.encode() not in disk(path)
