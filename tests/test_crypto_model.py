"""Property: after any sequence of writes, thread bindings, erasures and rotations, each
payload reads back as written unless its owner was erased after it was written, in
which case it reads as the erased placeholder (and raises ``KeyErased`` outside one).

A small model says who owns each scope's key: a user scope its user, a thread the user
it was bound to before its first write (else the namespace), the app the namespace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tether import Transaction
from tether.crypto import KeyErased, MasterKey, bind_thread, erase_user, erased_placeholders, rotate
from tether.store import secure
from tether.store.in_memory import MemoryStore

NS = "model"
USERS = ("u0", "u1", "u2")
SCOPES = ("app", *(f"user:{u}" for u in USERS), *(f"thread:t{i}" for i in range(3)))

ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(SCOPES)),
        st.tuples(st.just("bind"), st.sampled_from(("t0", "t1", "t2")), st.sampled_from(USERS)),
        st.tuples(st.just("erase"), st.sampled_from(USERS)),
        st.tuples(st.just("rotate")),
    ),
    max_size=25,
)


@dataclass
class Model:
    bound: dict[str, str] = field(default_factory=dict)  # thread -> user
    written: dict[str, list[tuple[int, str, int]]] = field(default_factory=dict)
    generation: dict[str, int] = field(default_factory=dict)  # owner -> key generation

    def owner(self, scope: str) -> str:
        if scope.startswith("user:"):
            return scope
        if scope.startswith("thread:") and scope[7:] in self.bound:
            return "user:" + self.bound[scope[7:]]
        return "namespace"

    def expected(self, scope: str) -> list[Any]:
        return [
            {"$erased": True} if self.generation.get(owner, 0) != gen else {"v": v}
            for v, owner, gen in self.written.get(scope, [])
        ]


@settings(max_examples=40, deadline=None)
@given(program=ops)
async def test_reads_follow_the_ownership_model(program: list[tuple[Any, ...]]) -> None:
    store = await secure(MemoryStore(), MasterKey.generate())
    model = Model()
    counter = 0
    for op in program:
        if op[0] == "write":
            scope = op[1]
            counter += 1
            txn = Transaction(store, NS)
            await txn.append(scope, "goal", {"v": counter})
            await txn.commit()
            owner = model.owner(scope)
            model.written.setdefault(scope, []).append(
                (counter, owner, model.generation.get(owner, 0))
            )
        elif op[0] == "bind":
            _, thread, user = op
            ok = await bind_thread(store, NS, thread, user, strict=False)
            can = model.bound.get(thread, user) == user and (
                thread in model.bound or not model.written.get("thread:" + thread)
            )
            assert ok == can
            if can:
                model.bound[thread] = user
        elif op[0] == "erase":
            owner = "user:" + op[1]
            report = await erase_user(store, NS, op[1])
            had_key = any(
                o == owner and g == model.generation.get(owner, 0)
                for rows in model.written.values()
                for _, o, g in rows
            )
            assert report.keys_destroyed == int(had_key)
            if had_key:
                model.generation[owner] = model.generation.get(owner, 0) + 1
        else:
            await rotate(store, MasterKey.generate())
    for scope in SCOPES:
        want = model.expected(scope)
        with erased_placeholders():
            assert [n.payload for n in await store.nodes(NS, scope)] == want
        if {"$erased": True} in want:
            try:
                await store.nodes(NS, scope)
            except KeyErased:
                pass
            else:
                raise AssertionError(f"{scope} holds erased payloads but read without error")
        else:
            assert [n.payload for n in await store.nodes(NS, scope)] == want
    await store.close()
