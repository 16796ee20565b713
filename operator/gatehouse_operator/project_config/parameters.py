"""Parameters in SQL: ``${service.parameters.name}`` and ``${sv.parameters.name}``.

A model's own parameters (its ``meta.parameters``) are also named with their model, as the
reference writes them: ``${sv.parameters.orders.channel}``; the name then holds one dot.

Values are substituted by the parameter's type, never pasted raw: strings are quoted with inner
quotes doubled, lists become ``'a', 'b'``, numbers must be finite, dates must be real
``YYYY-MM-DD`` dates and become ``CAST('…' AS DATE)``. A reference to a parameter that is not
defined, or has no value, is an error that names it — the SQL never keeps a raw ``${…}`` (the
reference did, and users met it as warehouse syntax errors). Names may hold hyphens.

``date_zoom`` is reserved: it resolves from the query context to the active zoom grain in lower
case ('' when none), unless the project defines a parameter of that name, which shadows it.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping, Sequence
from typing import Literal

from gatehouse_operator.errors import GatehouseError

ParameterType = Literal["string", "number", "date"]
Value = str | int | float | bool
RESERVED = ("date_zoom",)
REFERENCE = re.compile(
    r"\$\{\s*(?:service|sv)\.parameters\.([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)?)\s*\}"
)


class ParameterError(GatehouseError, ValueError):
    """A parameter reference that cannot be substituted safely; the message names it."""


def invalid(kind: ParameterType, value: Value) -> str:
    """Why ``value`` is not a value of a ``kind`` parameter ('' when it is one): the rule a
    query's value and a definition's default are held to alike."""
    if kind == "number":
        if isinstance(value, bool):
            return "is not a number"
        try:
            number = float(value)
        except (ValueError, OverflowError):
            return "is not a number"
        if not math.isfinite(number):
            return "is not a finite number"
    if kind == "date":
        text = str(value)
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return "is not a YYYY-MM-DD date"
        try:
            datetime.date.fromisoformat(text)
        except ValueError:
            return "is not a real date"
    return ""


def _literal(name: str, kind: ParameterType, value: Value) -> str:
    if problem := invalid(kind, value):
        written = str(value) if kind == "date" else value
        raise ParameterError(f"parameter {name!r}: {written!r} {problem}")
    if kind == "number":
        number = float(value)
        return str(int(number)) if number.is_integer() and "." not in str(value) else repr(number)
    if kind == "date":
        return f"CAST('{value}' AS DATE)"
    return "'" + str(value).replace("'", "''") + "'"


def comparable(kind: ParameterType, value: Value) -> float | str | None:
    """``value`` as a query of a ``kind`` parameter gets it, to compare values by: ``'25'`` and
    ``25`` are one number (None: not a value of that type)."""
    if kind == "number":
        return None if invalid(kind, value) else float(value)
    return str(value)


def render_value(name: str, kind: ParameterType, value: Value | Sequence[Value]) -> str:
    if isinstance(value, dict) or (
        isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list)) for v in value)
    ):
        raise ParameterError(f"parameter {name!r}: a value must be a string, number or date")
    if isinstance(value, (list, tuple)):
        if not value:
            raise ParameterError(f"parameter {name!r} has an empty list of values")
        return ", ".join(_literal(name, kind, item) for item in value)
    return _literal(name, kind, value)  # type: ignore[arg-type]


def substitute(
    sql: str,
    values: Mapping[str, Value | Sequence[Value] | None],
    types: Mapping[str, ParameterType],
    *,
    date_zoom: str | None = None,
) -> str:
    """``sql`` with every parameter reference replaced by its typed literal.

    ``types`` holds the defined parameters; ``values`` the values chosen (or defaults).
    """

    def replace(match: re.Match[str]) -> str:
        name = match[1]
        if name in types:
            value = values.get(name)
            if value is None:
                raise ParameterError(f"parameter {name!r} has no value and no default")
            return render_value(name, types[name], value)
        if name == "date_zoom":
            return _literal(name, "string", (date_zoom or "").lower())
        raise ParameterError(
            f"parameter {name!r} is referenced in SQL but not defined in parameters"
        )

    return REFERENCE.sub(replace, sql)


def references(sql: str) -> list[str]:
    return [match[1] for match in REFERENCE.finditer(sql)]
