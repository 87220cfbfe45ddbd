"""ScriptedModel: deterministic rules, memory, tool calls and their follow-ups."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import yaml

from tether.models import (
    MemoryWrite,
    Model,
    ModelConfigError,
    ModelRequest,
    ModelResponse,
    Rule,
    ScriptedModel,
    ToolSpec,
    Turn,
    call,
    remember,
)

WEATHER = ToolSpec(name="get_weather")
TIME = ToolSpec(name="get_time")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(response: ModelResponse) -> dict[str, Any]:
    """The assistant message a runtime would store for ``response``."""
    return {
        "role": "assistant",
        "content": response.content,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
        ],
    }


def tool_result(call_id: str, name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


async def ask(model: ScriptedModel, *messages: dict[str, Any], **kw: Any) -> ModelResponse:
    return await model.complete(ModelRequest(messages=list(messages), **kw))


NAMES = ScriptedModel(
    [
        Rule(
            match=r"my name is (\w+)",
            remember=[remember("name", "{1}")],
            answer="Nice to meet you, {1}.",
        ),
        Rule(match=r"what is my name", answer="Your name is {memory.name}."),
        Rule(match=r"what is my name", answer="I don't know your name yet."),
    ]
)


def test_is_a_model() -> None:
    assert isinstance(ScriptedModel(), Model)


async def test_alice_writes_memory_and_answers() -> None:
    r = await ask(NAMES, user("My name is Alice."))
    assert r.content == "Nice to meet you, Alice."
    assert r.memories == [MemoryWrite(type="memory", key="name", content="Alice")]
    assert r.tool_calls == []


async def test_alice_recalled_from_request_memory() -> None:
    r = await ask(NAMES, user("What is my name?"), memory={"memory:name": "Alice"})
    assert r.content == "Your name is Alice."
    assert r.memories == []


async def test_alice_recalled_from_history() -> None:
    first = await ask(NAMES, user("My name is Alice."))
    r = await ask(
        NAMES,
        user("My name is Alice."),
        {"role": "assistant", "content": first.content},
        user("What is my name?"),
    )
    assert r.content == "Your name is Alice."


async def test_durable_memory_wins_over_history() -> None:
    r = await ask(
        NAMES,
        user("My name is Alice."),
        user("What is my name?"),
        memory={"memory:name": "Bob"},
    )
    assert r.content == "Your name is Bob."


async def test_missing_memory_falls_through_to_next_rule() -> None:
    r = await ask(NAMES, user("what is my name"))
    assert r.content == "I don't know your name yet."


async def test_default_answer() -> None:
    assert (await ask(NAMES, user("Sing."))).content == "I have no scripted answer for 'Sing.'."
    custom = ScriptedModel(default="Sorry: {message}")
    assert (await ask(custom, user("Sing."))).content == "Sorry: Sing."
    assert (await ask(custom)).content == "Sorry: "  # no user message at all


async def test_default_that_cannot_render_is_a_config_error() -> None:
    with pytest.raises(ModelConfigError):
        await ask(ScriptedModel(default="{memory.name}"), user("hi"))


async def test_tool_call_then_follow_up_with_result() -> None:
    model = ScriptedModel(
        [
            Rule(
                match=r"weather in (\w+)",
                tools=[call("get_weather", city="{1}")],
                then="It is {result} in {1}.",
            )
        ]
    )
    history = [user("What's the weather in Paris?")]
    r = await ask(model, *history, tools=[WEATHER])
    assert r.content is None
    [c] = r.tool_calls
    assert (c.name, c.arguments) == ("get_weather", {"city": "Paris"})
    assert c.id.startswith("call_")

    history += [assistant(r), tool_result(c.id, "get_weather", '"sunny"')]
    follow = await ask(model, *history, tools=[WEATHER])
    assert follow.content == "It is sunny in Paris."
    assert follow.tool_calls == []


async def test_tool_call_ids_are_deterministic() -> None:
    model = ScriptedModel(
        [Rule(match=r"weather in (\w+)", tools=[call("get_weather", city="{1}")])]
    )
    a = await ask(model, user("weather in Paris"), tools=[WEATHER])
    b = await ask(ScriptedModel(model.rules), user("weather in Paris"), tools=[WEATHER])
    assert a.tool_calls[0].id == b.tool_calls[0].id
    # The same question later in the conversation is a different call.
    later = await ask(
        model,
        user("weather in Paris"),
        {"role": "assistant", "content": "Sunny."},
        user("weather in Paris"),
        tools=[WEATHER],
    )
    assert later.tool_calls[0].id != a.tool_calls[0].id


async def test_parallel_calls_and_results_by_name_and_position() -> None:
    model = ScriptedModel(
        [
            Rule(
                match=r"weather and time in (?P<city>\w+)",
                answer="Let me check.",
                tools=[call("get_weather", city="{city}"), call("get_time", city="{city}")],
                then="{city}: {results[get_weather][sky]}, {results[1]}.",
            )
        ]
    )
    history = [user("weather and time in Oslo")]
    r = await ask(model, *history, tools=[WEATHER, TIME])
    assert r.content == "Let me check."
    assert [c.name for c in r.tool_calls] == ["get_weather", "get_time"]
    assert len({c.id for c in r.tool_calls}) == 2
    weather, clock = r.tool_calls
    history += [
        assistant(r),
        tool_result(weather.id, "get_weather", '{"sky": "snow"}'),
        # No name on this one: found through the assistant's tool call id.
        {"role": "tool", "tool_call_id": clock.id, "content": "12:00"},
    ]
    follow = await ask(model, *history, tools=[WEATHER, TIME])
    assert follow.content == "Oslo: snow, 12:00."


async def test_follow_up_defaults_to_the_result() -> None:
    model = ScriptedModel([Rule(match="weather", tools=[call("get_weather")])])
    r = await ask(model, user("weather?"), tools=[WEATHER])
    c = r.tool_calls[0]
    follow = await ask(
        model, user("weather?"), assistant(r), tool_result(c.id, "get_weather", "rain")
    )
    assert follow.content == "rain"


async def test_follow_up_of_unknown_calls_echoes_results() -> None:
    history = [
        user("hi"),
        {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "name": "t"}]},
        tool_result("x", "t", "done"),
    ]
    assert (await ask(ScriptedModel(), *history)).content == "done"


async def test_memory_and_tool_call_in_one_response() -> None:
    model = ScriptedModel(
        [
            Rule(
                match=r"i live in (\w+)",
                tools=[call("get_weather", city="{1}")],
                remember=[remember("city", "{1}", type="preference")],
                then="Noted. It is {result} in {memory.city}.",
            )
        ]
    )
    r = await ask(model, user("I live in Lyon"), tools=[WEATHER])
    assert r.memories == [MemoryWrite(type="preference", key="city", content="Lyon")]
    assert r.tool_calls[0].arguments == {"city": "Lyon"}
    c = r.tool_calls[0]
    follow = await ask(
        model,
        user("I live in Lyon"),
        assistant(r),
        tool_result(c.id, "get_weather", '"mild"'),
        tools=[WEATHER],
        memory={"preference:city": "Lyon"},
    )
    assert follow.content == "Noted. It is mild in Lyon."
    assert follow.memories == []


async def test_tools_not_offered_skip_the_rule() -> None:
    model = ScriptedModel(
        [
            Rule(match="weather", tools=[call("get_weather")]),
            Rule(match="weather", answer="I can't look that up."),
        ]
    )
    assert (await ask(model, user("weather?"))).content == "I can't look that up."
    assert (await ask(model, user("weather?"), tools=[WEATHER])).tool_calls
    lax = ScriptedModel(model.rules, offered_tools_only=False)
    assert (await ask(lax, user("weather?"))).tool_calls


async def test_callables_when_context_and_memory_by_type() -> None:
    def shout(turn: Turn) -> str:
        return turn.message.upper()

    model = ScriptedModel(
        [
            Rule(match="shout", when=lambda t: len(t.history) > 1, answer=shout),
            Rule(match="shout", answer="Say it twice."),
            Rule(match="who", answer="{context[user]} likes {memory[preference:color]}."),
        ]
    )
    assert (await ask(model, user("shout"))).content == "Say it twice."
    assert (await ask(model, user("x"), user("shout it"))).content == "SHOUT IT"
    r = await ask(model, user("who?"), context={"user": "ann"}, memory={"preference:color": "teal"})
    assert r.content == "ann likes teal."


async def test_catch_all_and_case_insensitive() -> None:
    model = ScriptedModel(
        [Rule(match="HELLO", answer="hi"), Rule(answer="echo: {message}")]  # match=None
    )
    assert (await ask(model, user("well hello"))).content == "hi"
    assert (await ask(model, user("bye"))).content == "echo: bye"


async def test_requests_are_recorded() -> None:
    model = ScriptedModel()
    request = ModelRequest(messages=[user("a")])
    await model.complete(request)
    assert list(model.requests) == [request]


async def test_requests_kept_are_the_latest_few() -> None:
    # A request holds its whole message list: keeping all of a long thread's would grow
    # with the square of the history (issue 43). The last KEEP_REQUESTS stay, oldest first.
    from tether.models.scripted import KEEP_REQUESTS

    model = ScriptedModel()
    sent = [ModelRequest(messages=[user(f"m{k}")]) for k in range(KEEP_REQUESTS + 5)]
    for r in sent:
        await model.complete(r)
    assert list(model.requests) == sent[-KEEP_REQUESTS:]
    few = ScriptedModel(keep_requests=2)
    every = ScriptedModel(keep_requests=None)
    for r in sent:
        await few.complete(r)
        await every.complete(r)
    assert list(few.requests) == sent[-2:]
    assert list(every.requests) == sent
    none = ScriptedModel(keep_requests=0)
    assert (await none.complete(sent[0])).content and len(none.requests) == 0


@pytest.mark.parametrize("bad", [-1, 1.5, "8", True])
def test_keep_requests_must_be_a_count(bad: Any) -> None:
    with pytest.raises(ModelConfigError) as e:
        ScriptedModel(keep_requests=bad)
    assert e.value.code == ModelConfigError.default_code


async def test_from_yaml_config() -> None:
    config = yaml.safe_load(
        r"""
        kind: scripted
        default: "No idea."
        rules:
          - name: name
            match: "my name is (\\w+)"
            remember: [{type: memory, key: name, content: "{1}"}]
            answer: "Hi {1}."
          - match: "weather in (\\w+)"
            tools: [{name: get_weather, arguments: {city: "{1}", units: [metric]}}]
            then: "It is {result} in {1}."
        """
    )
    model = ScriptedModel.from_config(config)
    r = await ask(model, user("my name is Ann"))
    assert (r.content, r.memories) == (
        "Hi Ann.",
        [MemoryWrite(type="memory", key="name", content="Ann")],
    )
    r = await ask(model, user("weather in Rome"), tools=[WEATHER])
    assert r.tool_calls[0].arguments == {"city": "Rome", "units": ["metric"]}
    assert (await ask(model, user("?"))).content == "No idea."
    # A bare list of rules works too.
    assert ScriptedModel.from_config(config["rules"]).rules == model.rules


@pytest.mark.parametrize(
    "config",
    [
        {"rules": [{"match": "x", "answr": "typo"}]},
        {"rules": [{"match": "(", "answer": "bad regex"}]},
        {"rules": [{"match": "x", "answer": "{unclosed"}]},
        {"rules": [{"match": "x", "answer": "{memory.__class__}"}]},
        {"rules": [{"match": "x"}]},  # neither answer nor tools
        {"rules": [{"match": "x", "answer": "a", "then": "b"}]},  # then without tools
        {"rules": [{"match": "x", "tools": [{"arguments": {}}]}]},
        {"rules": [{"match": "x", "tools": {"name": "t"}}]},
        {"rules": [{"match": "x", "answer": "a", "remember": [{"key": "k"}]}]},
        {"rules": [{"match": "(?P<memory>x)", "answer": "a"}]},
        {"kind": "openai"},
        {"rulez": []},
    ],
)
def test_bad_config_is_rejected(config: dict[str, Any]) -> None:
    with pytest.raises(ModelConfigError) as info:
        ScriptedModel.from_config(config)
    assert info.value.code == "model_config"


async def test_private_attributes_are_refused_at_render_time() -> None:
    model = ScriptedModel([Rule(match="x", answer=lambda t: t.format("{memory._items}"))])
    with pytest.raises(ModelConfigError):
        await ask(model, user("x"))


async def test_demo_model() -> None:
    demo = ScriptedModel.demo()
    r = await ask(demo, user("Hello, my name is Alice."))
    assert r.memories == [MemoryWrite(type="memory", key="name", content="Alice")]
    assert (await ask(demo, user("What's my name?"))).content == "I don't know your name yet."
    r = await ask(demo, user("What's my name?"), memory={"memory:name": "Alice"})
    assert r.content == "Your name is Alice."
    r = await ask(demo, user("I like green tea."))
    assert r.memories == [MemoryWrite(type="preference", key="likes", content="green tea")]
    r = await ask(demo, user("weather in Oslo"), tools=[WEATHER])
    assert r.tool_calls[0].arguments == {"city": "Oslo"}


def test_public_dataclasses_are_keyword_only_and_frozen() -> None:
    from tether.models import ScriptedCall, ScriptedMemory

    for cls in (Rule, ScriptedCall, ScriptedMemory, Turn):
        params = dataclasses.fields(cls)
        assert all(f.kw_only for f in params if f.init), cls
        assert cls.__dataclass_params__.frozen, cls  # type: ignore[union-attr]


def test_model_from_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from tether.models import OpenAIModel, model_from_config

    assert isinstance(model_from_config([{"match": "x", "answer": "y"}]), ScriptedModel)
    assert isinstance(model_from_config({"rules": []}), ScriptedModel)
    monkeypatch.setenv("TETHER_TEST_KEY", "sk-env")
    m = model_from_config(
        {
            "kind": "openai",
            "base_url": "http://h/v1",
            "model": "m",
            "api_key_env": "TETHER_TEST_KEY",
        }
    )
    assert isinstance(m, OpenAIModel) and m.model == "m"
    for bad in (
        {"kind": "openai", "api_key": "sk-inline"},
        {"kind": "openai", "api_key_env": "TETHER_TEST_UNSET_KEY"},
        {"kind": "openai", "temprature": 0},
        {"kind": "bard"},
    ):
        with pytest.raises(ModelConfigError):
            model_from_config(bad)
