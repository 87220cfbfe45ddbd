"""Templates and conditions, rendered in Jinja2's immutable sandbox.

A spec's system prompts, inputs, tool arguments, variable values and edge
conditions are Jinja2 templates. They see:

    input       what the node was fed (the user's input for the start node)
    output      (conditions only) the output of the node the edge leaves
    variables   every declared variable's current value: ``{{ variables.city }}``
    nodes       outputs of the nodes this run executed: ``{{ nodes.search.output }}``
    context     the caller's ``context`` for this call (never persisted)
    run, thread the run id and thread id

They run in ``ImmutableSandboxedEnvironment`` with ``StrictUndefined``: an
unknown name, a private attribute or a mutating method raises instead of
rendering as an empty string. A template that is exactly one ``{{ expression }}``
keeps its value's type (a dict stays a dict, ``{{ 3 }}`` is the integer 3);
anything else renders to a string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import jinja2
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import ConditionError, SpecError, TemplateError

__all__ = ["Condition", "Template", "environment"]

_ENV: Final = ImmutableSandboxedEnvironment(
    undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
)
# "{{ expr }}" and nothing else: evaluated as an expression so the value keeps its type.
_SINGLE: Final = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\}\}|\{\{|\{%|\{#).)*)\}\}\s*$", re.DOTALL)


def environment() -> ImmutableSandboxedEnvironment:
    """The shared sandboxed environment (add filters to it before building specs)."""
    return _ENV


def _check_defined(value: Any, source: str) -> Any:
    if isinstance(value, jinja2.Undefined):
        # str()/bool() of a StrictUndefined raises the informative UndefinedError.
        str(value)
        raise TemplateError(f"template {source!r} rendered to an undefined value")
    return value


class Template:
    """A compiled template. Syntax errors raise SpecError at construction, not mid-run."""

    __slots__ = ("_expr", "_tmpl", "source")

    def __init__(self, source: str, *, where: str = "template") -> None:
        if not isinstance(source, str):
            raise SpecError(f"{where}: a template is a string, got {source!r}")
        self.source = source
        self._expr: Any = None
        self._tmpl: jinja2.Template | None = None
        m = _SINGLE.match(source)
        try:
            if m is not None:
                self._expr = _ENV.compile_expression(m.group("expr"), undefined_to_none=False)
            else:
                self._tmpl = _ENV.from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise SpecError(f"{where}: template {source!r} does not parse: {e}") from None

    @property
    def is_expression(self) -> bool:
        return self._expr is not None

    def __repr__(self) -> str:
        return f"Template({self.source!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Template) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)

    def value(self, scope: Mapping[str, Any]) -> Any:
        """The value: native for a single ``{{ expression }}``, else the rendered string."""
        try:
            if self._expr is not None:
                return _check_defined(self._expr(**scope), self.source)
            assert self._tmpl is not None
            return self._tmpl.render(**scope)
        except TemplateError:
            raise
        except Exception as e:  # UndefinedError, SecurityError, TypeError, ZeroDivision...
            raise TemplateError(
                f"template {self.source!r} failed: {type(e).__name__}: {e}",
                template=self.source,
            ) from None

    def render(self, scope: Mapping[str, Any]) -> str:
        """The rendered text (a non-string expression value is converted with str())."""
        v = self.value(scope)
        return v if isinstance(v, str) else str(v)


class Condition:
    """An edge condition: ``"{{ output == 'yes' }}"`` or the bare expression ``"output == 'yes'"``.

    ``test`` returns a bool or raises ConditionError: an unknown name or a failing
    expression is an error, never a silent False.
    """

    __slots__ = ("_expr", "source")

    def __init__(self, source: str, *, where: str = "condition") -> None:
        if not isinstance(source, str) or not source.strip():
            raise SpecError(f"{where}: a condition is a non-empty string, got {source!r}")
        self.source = source
        m = _SINGLE.match(source)
        expr = m.group("expr") if m is not None else source
        if "{{" in expr or "{%" in expr:
            raise SpecError(
                f"{where}: condition {source!r} must be one expression, "
                "either bare or in a single {{ ... }}"
            )
        try:
            self._expr = _ENV.compile_expression(expr, undefined_to_none=False)
        except jinja2.TemplateSyntaxError as e:
            raise SpecError(f"{where}: condition {source!r} does not parse: {e}") from None

    def __repr__(self) -> str:
        return f"Condition({self.source!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Condition) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)

    def test(self, scope: Mapping[str, Any]) -> bool:
        try:
            return bool(self._expr(**scope))
        except Exception as e:
            raise ConditionError(
                f"condition {self.source!r} failed: {type(e).__name__}: {e}; "
                "fix the condition (test optional names with 'is defined')",
                condition=self.source,
            ) from None
