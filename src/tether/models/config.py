"""A model from plain data, for specs written in YAML.

    model: {kind: scripted, rules: [...], default: "..."}
    model: {kind: openai, base_url: "http://localhost:11434/v1", model: llama3.1,
            api_key_env: OPENAI_API_KEY, memory_tool: true}

An API key never lives in a spec: ``api_key_env`` names the environment variable
that holds it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.messages import Model
from .errors import ModelConfigError
from .openai import OpenAIModel
from .scripted import ScriptedModel

_OPENAI_KEYS = frozenset(
    {
        "kind",
        "base_url",
        "model",
        "api_key_env",
        "timeout",
        "max_retries",
        "backoff",
        "max_backoff",
        "memory_tool",
        "memory_types",
        "memory_prompt",
        "options",
        "headers",
    }
)


def model_from_config(config: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> Model:
    """A ``ScriptedModel`` or ``OpenAIModel`` from a spec's ``model:`` entry.

    A list is a scripted model's rules; a mapping's ``kind`` (default ``scripted``)
    picks the model.
    """
    if not isinstance(config, Mapping):
        return ScriptedModel.from_config(config)
    kind = config.get("kind", "scripted")
    if kind == "scripted":
        return ScriptedModel.from_config(config)
    if kind != "openai":
        raise ModelConfigError(f"unknown model kind {kind!r}; use scripted or openai")
    if "api_key" in config:
        raise ModelConfigError(
            "a spec must not hold an API key; put it in an environment variable "
            "and name it with api_key_env"
        )
    if unknown := set(config) - _OPENAI_KEYS:
        raise ModelConfigError(
            f"unknown openai model keys {sorted(unknown)}; allowed: {sorted(_OPENAI_KEYS)}"
        )
    options = {k: v for k, v in config.items() if k not in ("kind", "api_key_env")}
    api_key = None
    if (var := config.get("api_key_env")) is not None:
        api_key = os.environ.get(str(var))
        if not api_key:
            raise ModelConfigError(
                f"the environment variable {var} (api_key_env) is not set", api_key_env=var
            )
    try:
        return OpenAIModel(api_key=api_key, **options)
    except TypeError as exc:  # a value of the wrong type for the constructor
        raise ModelConfigError(f"bad openai model options: {exc}") from None
