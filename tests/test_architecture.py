"""The layers of docs/architecture.md, checked: imports only look down.

    core  <  store  <  crypto  <  projections  <  control  <  models < runtime, adapters
          <  server, client  <  mcp  <  cli

(``crypto`` sits on ``store``: it wraps a backend and uses its key-table hook;
``runtime`` uses ``models``; ``mcp`` checks tokens with ``server.auth``, and ``cli``
starts it.) Two checks: every import statement in src/tether
(function-level ones too) names a package its own may import, and no package
imports another's private (``_x``) module; then, in fresh interpreters, importing a
package loads nothing above it, and a plaintext store never loads the cipher.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "tether"

# Package -> the packages it may import (besides itself). The root ``tether`` package
# is the lazy facade over everything and is not a layer.
BELOW: dict[str, set[str]] = {
    "core": set(),
    "store": {"core"},
    "crypto": {"core", "store"},
    "projections": {"core", "store"},
    "control": {"core", "store", "crypto", "projections"},
    "models": {"core"},
    "runtime": {"core", "store", "crypto", "projections", "control", "models"},
    "adapters": {"core", "store", "crypto", "projections", "control"},
    "server": {"core", "store", "crypto", "projections", "control", "models", "runtime"},
    "client": {"core", "store", "crypto", "projections", "control"},
    "mcp": {"core", "store", "crypto", "projections", "control", "server"},
    "cli": {"core", "store", "crypto", "projections", "control", "models", "runtime", "mcp"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every tether import in ``path``."""
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    package = parts[:-1]  # what a relative import is relative to (for __init__ too)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "tether":  # from tether import x: x may be a subpackage
                out += [(node.lineno, f"tether.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return [(line, m) for line, m in out if m == "tether" or m.startswith("tether.")]


def _package(path: Path) -> str | None:
    """The layer ``path`` belongs to: its top package (or module, as client.py is)."""
    first = path.relative_to(SRC).parts[0]
    return None if first == "__init__.py" else first.removesuffix(".py")


def test_every_package_has_a_layer() -> None:
    packages = {
        p.name.removesuffix(".py")
        for p in SRC.iterdir()
        if (p.is_dir() and any(p.glob("*.py"))) or (p.suffix == ".py" and p.name != "__init__.py")
    }
    assert packages == set(BELOW)


def test_imports_only_look_down_and_never_into_private_modules() -> None:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        own = _package(path)
        if own is None:
            continue  # tether/__init__.py: the facade
        for line, module in _imports(path):
            parts = module.split(".")
            target = parts[1] if len(parts) > 1 else "tether"
            where = f"{path.relative_to(SRC.parent)}:{line} imports {module}"
            if target in (own, "__version__"):
                continue
            if target not in BELOW[own]:
                bad.append(f"{where}: {own} may import only {sorted(BELOW[own])}")
            elif any(p.startswith("_") for p in parts[2:]):
                bad.append(f"{where}: a private module of {target}; export what you need")
    assert not bad, "\n".join(bad)


def _loaded(code: str) -> dict[str, list[str]]:
    script = (
        "import json, sys\n"
        f"{code}\n"
        "mods = sorted(m for m in sys.modules if m.startswith('tether.'))\n"
        "third = sorted({m.split('.')[0] for m in sys.modules})\n"
        "print(json.dumps({'tether': mods, 'third': third}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    data: dict[str, list[str]] = json.loads(out.splitlines()[-1])
    return data


@pytest.mark.parametrize("package", ["store", "projections", "control", "client"])
def test_importing_a_package_loads_nothing_above_it(package: str) -> None:
    loaded = _loaded(f"import tether.{package}")
    packages = {m.split(".")[1] for m in loaded["tether"]} - {package}
    assert packages <= BELOW[package], sorted(packages - BELOW[package])
    if package != "client":
        assert "httpx" not in loaded["third"]
    assert not {"jinja2", "yaml", "fastapi"} & set(loaded["third"])


def test_a_plaintext_store_never_loads_the_cipher(tmp_path: Path) -> None:
    db = tmp_path / "plain.db"
    loaded = _loaded(
        "import asyncio\n"
        "from tether.store import open_store\n"
        "async def main():\n"
        f"    for url in ('memory://', 'sqlite:///{db}'):\n"
        "        s = await open_store(url)\n"
        "        await s.close()\n"
        "asyncio.run(main())"
    )
    assert not [m for m in loaded["tether"] if m.startswith("tether.crypto")]
    assert "cryptography" not in loaded["third"]
    # nor the key table's module: the store asks its own connection whether it holds keys
    assert "tether.store._sqlite_keys" not in loaded["tether"]


def test_no_backend_overrides_the_checked_store_methods() -> None:
    """``Store.commit``, ``reset_scope`` and ``delete_namespace`` check their arguments, then
    call the backend's ``_do_*`` hook: a backend that overrode them would skip the checks."""
    import importlib
    import pkgutil

    import tether.store
    from tether.store.base import Store

    for package in (tether.store, importlib.import_module("tether.crypto")):
        for m in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            importlib.import_module(m.name)
    seen, todo = [], list(Store.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith("tether."):
            seen.append(cls)
    assert {c.__name__ for c in seen} >= {
        "MemoryStore",
        "SQLiteStore",
        "PostgresStore",
        "RedisStore",
        "EncryptedStore",
    }
    bad = [
        f"{c.__module__}.{c.__qualname__}.{name}"
        for c in seen
        for name in ("commit", "reset_scope", "delete_namespace")
        if name in vars(c)
    ]
    assert not bad, f"override the _do_* hook instead: {bad}"


def test_the_store_modules_import_no_cycle() -> None:
    """Within ``store``, no module imports (even inside a function) one that imports it
    back: each room looks only down (``_sqlite_keys`` and ``_sqlite_vectors`` take
    SQLite's retry loop from ``_sqlite_busy``, not from the store they sit beside)."""
    store = SRC / "store"
    graph = {
        p.stem: {
            m.split(".")[2]
            for _, m in _imports(p)
            if m.startswith("tether.store.") and m.split(".")[2] != p.stem
        }
        for p in store.glob("*.py")
    }
    cycles = []
    for start in graph:
        todo, seen = list(graph[start]), set()
        while todo:
            m = todo.pop()
            if m == start:
                cycles.append(start)
                break
            if m not in seen and m in graph:
                seen.add(m)
                todo += graph[m]
    assert not cycles, f"store modules in an import cycle: {sorted(cycles)}"
