"""How much each namespace and scope holds, and when it was last written (issue 43).

    report = await control.usage(store)                 # every namespace
    report = await control.usage(store, "acme")         # one, with its scopes
    report.to_dict()["namespaces"][0]["payload_bytes"]

Per scope: the nodes it holds (after any prune), the bytes of their stored payloads
(the codec's: ciphertext on an encrypted store), its generation and the ``createdAt``
of its newest node (its last activity). Per namespace: the same summed, the number of
scopes, and the latest activity among them. Read-only; one ``stats`` and one newest-node
read per scope, so it costs the number of scopes, not their history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..core.erased import erased_placeholders
from ..store.base import Store, check_name

__all__ = ["NamespaceUsage", "ScopeUsage", "UsageReport", "scope_usage", "usage"]

_PAGE: Final = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class ScopeUsage:
    scope: str
    nodes: int
    payload_bytes: int
    generation: int
    last_activity: str | None  # createdAt of the newest node

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "nodes": self.nodes,
            "payload_bytes": self.payload_bytes,
            "generation": self.generation,
            "last_activity": self.last_activity,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScopeUsage:
        return cls(
            scope=data["scope"],
            nodes=data["nodes"],
            payload_bytes=data["payload_bytes"],
            generation=data["generation"],
            last_activity=data.get("last_activity"),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class NamespaceUsage:
    namespace: str
    scopes: int
    nodes: int
    payload_bytes: int
    last_activity: str | None
    by_scope: tuple[ScopeUsage, ...] = ()  # with ``scopes=True`` only

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "scopes": self.scopes,
            "nodes": self.nodes,
            "payload_bytes": self.payload_bytes,
            "last_activity": self.last_activity,
        }
        if self.by_scope:
            out["by_scope"] = [s.to_dict() for s in self.by_scope]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NamespaceUsage:
        return cls(
            namespace=data["namespace"],
            scopes=data["scopes"],
            nodes=data["nodes"],
            payload_bytes=data["payload_bytes"],
            last_activity=data.get("last_activity"),
            by_scope=tuple(ScopeUsage.from_dict(s) for s in data.get("by_scope", ())),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageReport:
    namespaces: tuple[NamespaceUsage, ...] = field(default=())
    operation: str = field(default="stats", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"operation": self.operation, "namespaces": [n.to_dict() for n in self.namespaces]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UsageReport:
        return cls(namespaces=tuple(NamespaceUsage.from_dict(n) for n in data["namespaces"]))


async def scope_usage(store: Store, namespace: str, scope: str) -> ScopeUsage:
    """Usage of one scope (nodes 0 and no last activity if it holds none)."""
    check_name("namespace", namespace)
    check_name("scope", scope)
    head = await store.head(namespace, scope)
    return await _scope_usage(store, namespace, scope, head.generation)


async def _scope_usage(store: Store, namespace: str, scope: str, generation: int) -> ScopeUsage:
    st = await store.stats(namespace, scope)
    with erased_placeholders(True):  # only its createdAt is read: an erased one will do
        newest = await store.nodes(namespace, scope, limit=1, descending=True)
    return ScopeUsage(
        scope=scope,
        nodes=st.nodes,
        payload_bytes=st.payload_bytes,
        generation=generation,
        last_activity=newest[0].created_at if newest else None,
    )


async def _namespace_usage(store: Store, namespace: str, *, scopes: bool) -> NamespaceUsage:
    found: list[ScopeUsage] = []
    after: str | None = None
    while True:
        page = await store.list_scopes(namespace, after=after, limit=_PAGE)
        for info in page:
            found.append(await _scope_usage(store, namespace, info.scope, info.generation))
        if len(page) < _PAGE:
            break
        after = page[-1].scope
    times = [s.last_activity for s in found if s.last_activity is not None]
    return NamespaceUsage(
        namespace=namespace,
        scopes=len(found),
        nodes=sum(s.nodes for s in found),
        payload_bytes=sum(s.payload_bytes for s in found),
        last_activity=max(times) if times else None,
        by_scope=tuple(found) if scopes else (),
    )


async def usage(
    store: Store, namespace: str | None = None, *, scopes: bool | None = None
) -> UsageReport:
    """Usage of ``namespace`` (with its scopes), or of every namespace (totals only,
    unless ``scopes=True``)."""
    names = await namespaces_named(store, namespace)
    per_scope = (namespace is not None) if scopes is None else scopes
    return UsageReport(
        namespaces=tuple([await _namespace_usage(store, ns, scopes=per_scope) for ns in names])
    )


async def namespaces_named(store: Store, namespace: str | None) -> list[str]:
    """``[namespace]`` (its name checked), or every namespace of the store (read a page
    at a time) when it is None: what usage and gc act on."""
    if namespace is not None:
        check_name("namespace", namespace)
        return [namespace]
    names: list[str] = []
    after: str | None = None
    while True:
        page = await store.list_namespaces(after=after, limit=_PAGE)
        names += page
        if len(page) < _PAGE:
            return names
        after = page[-1]
