"""Specs (Python and YAML), sandboxed templates and conditions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.models import ScriptedModel
from tether.projections import Window
from tether.runtime import (
    Agent,
    Condition,
    ConditionError,
    Edge,
    LLMNode,
    Spec,
    SpecError,
    Template,
    TemplateError,
    ToolNode,
    VarNode,
    VarSetNode,
)

# -- templates and conditions ---------------------------------------------------------


def test_single_expression_keeps_its_type_else_renders_text() -> None:
    scope = {"input": {"a": [1, 2]}, "variables": {"n": 3}}
    assert Template("{{ input }}").value(scope) == {"a": [1, 2]}
    assert Template("  {{ variables.n + 1 }} ").value(scope) == 4
    assert Template("n={{ variables.n }}").value(scope) == "n=3"
    assert Template("{{ input.a | length }} items").render(scope) == "2 items"
    assert Template("{{ variables.n }}").render(scope) == "3"
    assert Template("{{ 1 }}{{ 2 }}").value(scope) == "12"


@pytest.mark.parametrize(
    "source",
    [
        "{{ nope }}",  # unknown name
        "{{ variables.missing }}",  # unknown attribute
        "hello {{ variables.missing }}",
        "{{ input.__class__ }}",  # private attribute: undefined in the sandbox
        "{{ variables.update({'x': 1}) }}",  # mutation is unsafe in the immutable sandbox
        "{{ 1 / 0 }}",
    ],
)
def test_template_failures_raise(source: str) -> None:
    with pytest.raises(TemplateError):
        Template(source).value({"input": {}, "variables": {}})


def test_template_syntax_errors_are_spec_errors() -> None:
    with pytest.raises(SpecError, match="does not parse"):
        Template("{{ unclosed")
    with pytest.raises(SpecError, match="does not parse"):
        Condition("output ==")
    with pytest.raises(SpecError, match="one expression"):
        Condition("{{ a }} and {{ b }}")


def test_conditions() -> None:
    scope = {"output": "yes", "variables": {"n": 2}, "nodes": {}}
    assert Condition("output == 'yes'").test(scope) is True
    assert Condition("{{ variables.n > 5 }}").test(scope) is False
    assert Condition("nodes.x is defined").test(scope) is False
    with pytest.raises(ConditionError, match=r"variables\.m"):
        Condition("variables.m > 1").test(scope)
    with pytest.raises(ConditionError):
        Condition("nodes.x.output == 1").test(scope)


# -- Python specs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Spec(nodes=[]), "at least one node"),
        (lambda: Spec(nodes=[LLMNode(name="a"), LLMNode(name="a")], start="a"), "two nodes"),
        (lambda: Spec(nodes=[LLMNode(name="a"), LLMNode(name="b")]), "name the start"),
        (lambda: Spec(nodes=[LLMNode(name="a")], start="b"), "start node 'b'"),
        (lambda: Spec(nodes=[LLMNode(name="has space")]), "must start with a letter"),
        (
            lambda: Spec(nodes=[LLMNode(name="a")], edges=[Edge(src="a", dst="z")]),
            "no node 'z'",
        ),
        (
            lambda: Spec(nodes=[LLMNode(name="a"), VarSetNode(name="s", var="v")], start="a"),
            "no var node declares",
        ),
        (lambda: Spec(nodes=[VarNode(name="v", type="money")]), "unknown type"),
        (lambda: Spec(nodes=[VarNode(name="v", scope="galaxy")]), "unknown scope"),
        (lambda: Spec(nodes=[VarNode(name="v", type="integer", default="x")]), "default"),
        (lambda: Spec(nodes=[LLMNode(memory={"policy": "forever"})]), "memory"),
        (lambda: Spec(nodes=[LLMNode(system="{% if %}")]), "does not parse"),
        (lambda: Spec(nodes=[LLMNode(tools="search")]), "list of names"),
        (
            lambda: Spec(nodes=[VarNode(name="a", var="v"), VarNode(name="b", var="v")], start="a"),
            "declared twice",
        ),
    ],
)
def test_invalid_specs_are_rejected_with_what_to_fix(build: Any, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        build()


def test_spec_reading() -> None:
    spec = Spec(
        nodes=[
            LLMNode(name="a", memory={"policy": "window", "size": 4}),
            VarNode(name="v", type="integer", default="3"),
        ],
        edges=[Edge(src="a", dst="v", condition="output")],
        start="a",
    )
    assert spec.policy("a") == Window(size=4)
    assert [(d.name, d.default) for d in spec.var_decls] == [("v", 3)]
    assert [e.dst for e, _ in spec.outgoing("a")] == ["v"]
    assert spec.outgoing("v") == []
    assert Spec.single(system="hi").start == "agent"


def test_agent_checks_the_tools_and_models_a_spec_names() -> None:
    model = ScriptedModel()
    with pytest.raises(SpecError, match="does not have"):
        Agent(Spec(nodes=[LLMNode(tools=["search"])]), model)
    with pytest.raises(SpecError, match="calls 'search'"):
        Agent(Spec(nodes=[ToolNode(name="t", tool="search")]), model)
    with pytest.raises(SpecError, match="models="):
        Agent(Spec(nodes=[LLMNode(model="big")]), model)

    def search(q: str) -> str:
        return q

    # A tool node may bring its own callable.
    agent = Agent(Spec(nodes=[ToolNode(name="t", tool=search)]), model)
    assert "search" in agent.tools


# -- YAML ------------------------------------------------------------------------------


def test_yaml_file_and_round_trip(tmp_path: Path) -> None:
    f = tmp_path / "agent.yaml"
    f.write_text(
        """
start: chat
nodes:
  - kind: llm
    name: chat
    system: "You are {{ context.persona }}."
    memory: {policy: window, size: 6}
    tools: [lookup]
    edges:
      - to: keep
        when: "{{ 'city' in output }}"
  - {kind: var, name: city, type: string, scope: user, default: Paris}
  - {kind: var_set, name: keep, var: city, value: "{{ input }}"}
  - {kind: tool, name: lookup}
edges:
  - {from: keep, to: lookup}
"""
    )
    spec = Spec.from_yaml(f)
    assert spec.start == "chat"
    chat = spec.node("chat")
    assert isinstance(chat, LLMNode) and chat.tools == ("lookup",)
    assert spec.policy("chat") == Window(size=6)
    assert [(e.src, e.dst, e.condition) for e in spec.edges] == [
        ("chat", "keep", "{{ 'city' in output }}"),
        ("keep", "lookup", None),
    ]
    assert Spec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: llm\nname: a\nsystme: typo\n", "unknown keys"),
        ("kind: robot\nname: a\n", "unknown kind"),
        ("name: a\n", "unknown keys"),
        (
            "- kind: llm\n  name: a\n  start: true\n- kind: llm\n  name: b\n  start: true\n",
            "several start",
        ),
        ("kind: var_set\nname: s\n", "names the variable"),
        ("kind: llm\nedges: [{to: x, unless: y}]\n", "unknown edge keys"),
        ("[unclosed\n", "invalid YAML"),
    ],
)
def test_yaml_errors(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(SpecError, match=message):
        Spec.from_yaml(f)


def test_yaml_directory_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such file"):
        Spec.from_yaml(tmp_path / "missing")
    with pytest.raises(SpecError, match=r"no \*\.yaml"):
        Spec.from_yaml(tmp_path)


# -- property: any spec survives to_dict -> from_dict ------------------------------------

names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    node_names = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    nodes: list[Any] = []
    for i, n in enumerate(node_names):
        kind = draw(st.sampled_from(["llm", "var", "tool"]))
        if kind == "llm":
            nodes.append(
                LLMNode(
                    name=n,
                    system=draw(st.none() | st.just("Hi {{ context.who }}")),
                    memory=draw(st.none() | st.just({"policy": "window", "size": 3})),
                    tools=draw(st.none() | st.just(["t"])),
                )
            )
        elif kind == "var":
            nodes.append(VarNode(name=n, type=draw(st.sampled_from(["string", "json"]))))
        else:
            nodes.append(ToolNode(name=n, tool="t", arguments={"x": "{{ input }}", "n": i}))
    edges = draw(
        st.lists(
            st.builds(
                Edge,
                src=st.sampled_from(node_names),
                dst=st.sampled_from(node_names),
                condition=st.none() | st.just("output is defined"),
            ),
            max_size=6,
        )
    )
    return Spec(nodes=nodes, edges=edges, start=draw(st.sampled_from(node_names)))


@settings(max_examples=60, deadline=None)
@given(specs())
def test_spec_dict_round_trip(spec: Spec) -> None:
    again = Spec.from_dict(spec.to_dict())
    assert again == spec
    assert again.to_dict() == spec.to_dict()
