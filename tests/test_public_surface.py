"""The public surface stays explicit, and every error pickles with its code."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle
import pkgutil

import pytest

import tether
from tether import TetherError


def test_all_names_exist_and_are_unique() -> None:
    assert len(tether.__all__) == len(set(tether.__all__))
    for name in tether.__all__:
        assert hasattr(tether, name), name


def test_exported_classes_report_the_tether_module() -> None:
    for name in tether.__all__:
        obj = getattr(tether, name)
        if inspect.isclass(obj):
            assert obj.__module__.startswith("tether"), name


def test_public_dataclasses_are_keyword_only() -> None:
    for name in tether.__all__:
        obj = getattr(tether, name)
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                if f.init:
                    assert f.kw_only, f"{name}.{f.name} must be keyword-only"


def _import_all() -> None:
    # Import every module so that every error class defined anywhere is checked.
    for mod in pkgutil.walk_packages(tether.__path__, "tether."):
        try:
            importlib.import_module(mod.name)
        except ModuleNotFoundError as e:
            # An optional extra (a framework adapter, a backend) that is not installed.
            if e.name is None or e.name.startswith("tether"):
                raise


def _error_classes() -> list[type[TetherError]]:
    _import_all()
    seen: list[type[TetherError]] = []
    stack: list[type[TetherError]] = [TetherError]
    while stack:
        cls = stack.pop()
        seen.append(cls)
        stack.extend(cls.__subclasses__())
    return seen


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_errors_pickle_with_code_and_details(cls: type[TetherError]) -> None:
    err = cls("something failed", code="custom_code", detail=1)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert back.code == "custom_code"
    assert back.details["detail"] == 1
    assert back.message == "something failed"
    assert back.to_dict()["code"] == "custom_code"


def test_invalid_snapshot_carries_index_and_id() -> None:
    with pytest.raises(tether.InvalidSnapshot) as e:
        tether.AgentState.from_dict(
            {"version": 1, "nodes": [{"id": "cw_" + "0" * 24}], "frontier": []}
        )
    assert e.value.index == 0
    assert e.value.node_id == "cw_" + "0" * 24
    assert e.value.code == "shape"
    assert isinstance(e.value, TetherError)


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_error_code_is_stable_at_class_level(cls: type[TetherError]) -> None:
    # A subclass declares default_code once; the class-level code follows it.
    assert cls.code == cls.default_code
    assert cls("something failed").code == cls.code


def test_import_tether_is_light_and_everything_stays_reachable() -> None:
    # The runtime, model clients and HTTP client load on first use (PEP 562), so a
    # program that only stores state skips jinja2, yaml, httpx and rich; names and the
    # subpackages the package used to import eagerly are still reachable from it.
    import subprocess
    import sys

    code = (
        "import sys, tether\n"
        "heavy = sorted(m for m in ('httpx', 'jinja2', 'yaml', 'rich', 'tether.runtime')"
        " if m in sys.modules)\n"
        "assert not heavy, heavy\n"
        "assert tether.projections.load_conversation and tether.control.erase_user\n"
        "from tether import Agent, SyncClient\n"
        "assert Agent.__module__ == 'tether' and tether.Agent is Agent\n"
        "assert 'Agent' in dir(tether) and 'Client' in dir(tether)\n"
        "try:\n"
        "    tether.no_such_name\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


# Each layer's package, and the most names its __init__ may export: a surface small
# enough to read on one screen. Everything else is private (``_x``) or reached by its
# module's full name, and never imported across packages (tests/test_architecture.py).
PACKAGES = {
    "tether.core": 10,
    "tether.store": 20,
    "tether.crypto": 30,
    "tether.projections": 60,
    "tether.control": 45,
    "tether.models": 30,
    "tether.runtime": 35,
    "tether.adapters": 5,
    "tether.server": 15,
    "tether.client": 5,
    "tether.cli": 5,
}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_each_package_declares_a_small_public_surface(package: str) -> None:
    mod = importlib.import_module(package)
    names = getattr(mod, "__all__", None)
    assert isinstance(names, list), f"{package} has no __all__"
    assert len(names) == len(set(names)), f"{package}.__all__ repeats a name"
    assert len(names) <= PACKAGES[package], f"{package} exports {len(names)} names"
    for name in names:
        assert not name.startswith("_"), f"{package} exports the private {name}"
        if not hasattr(mod, name):  # a module of the package, imported by its full name
            importlib.import_module(f"{package}.{name}")
