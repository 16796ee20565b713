"""Custom granularities become sub-dimensions of the date dimensions that list them.

Granularity ``k`` on dimension ``d`` becomes dimension ``d_k``: its SQL is the granularity's with
``${COLUMN}`` replaced by ``d``'s SQL, its type the granularity's (``date`` unless set), and it
inherits ``d``'s ``requiredAttributes`` and ``anyAttributes``, so it is never more visible than
the dimension it comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired, TypedDict

from pydantic import JsonValue

from gatehouse_operator.project_config import time_intervals
from gatehouse_operator.project_config.schema import CustomGranularity, GranularityType

COLUMN = "${COLUMN}"
Inherited = Literal["requiredAttributes", "anyAttributes"]
INHERITED: tuple[Inherited, ...] = ("requiredAttributes", "anyAttributes")
# How a dbt model's YAML writes them, under a column's meta.dimension.
WRITTEN_AS: dict[str, Inherited] = {
    "required_attributes": "requiredAttributes",
    "any_attributes": "anyAttributes",
}


class BaseDimension(TypedDict):
    """The dimension a custom granularity is applied to, as ``sub_dimension`` reads it; the
    attributes as the model's YAML wrote them."""

    name: str
    sql: str
    requiredAttributes: NotRequired[JsonValue]
    anyAttributes: NotRequired[JsonValue]


class SubDimension(BaseDimension):
    """The dimension a custom granularity makes of a date dimension."""

    label: str
    type: GranularityType
    timeIntervalBaseDimensionName: str


def parent(name: str, sql: str, meta: Mapping[str, JsonValue]) -> BaseDimension:
    """A dimension as sub_dimension reads it, from its name, SQL and ``meta.dimension``."""
    found = BaseDimension(name=name, sql=sql)
    for written, attribute in WRITTEN_AS.items():
        if written in meta:
            found[attribute] = meta[written]
    return found


def sub_dimension(
    dimension: BaseDimension, key: str, granularity: CustomGranularity
) -> SubDimension:
    derived = SubDimension(
        name=time_intervals.sub_dimension_name(dimension["name"], key),
        label=granularity.label,
        sql=granularity.sql.replace(COLUMN, dimension["sql"]),
        type=granularity.type,
        timeIntervalBaseDimensionName=dimension["name"],
    )
    for attribute in INHERITED:
        if attribute in dimension:
            derived[attribute] = dimension[attribute]
    return derived
