"""Custom granularities become sub-dimensions of the date dimensions that list them.

Granularity ``k`` on dimension ``d`` becomes dimension ``d_k``: its SQL is the granularity's with
``${COLUMN}`` replaced by ``d``'s SQL, its type the granularity's (``date`` unless set), and it
inherits ``d``'s ``requiredAttributes`` and ``anyAttributes``, so it is never more visible than
the dimension it comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gatehouse_operator.project_config import time_intervals
from gatehouse_operator.project_config.schema import CustomGranularity

COLUMN = "${COLUMN}"
INHERITED = ("requiredAttributes", "anyAttributes")
# How a dbt model's YAML writes them, under a column's meta.dimension.
WRITTEN_AS = {"required_attributes": "requiredAttributes", "any_attributes": "anyAttributes"}


def parent(name: str, sql: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """A dimension as sub_dimension reads it, from its name, SQL and ``meta.dimension``."""
    found: dict[str, Any] = {"name": name, "sql": sql}
    for written, attribute in WRITTEN_AS.items():
        if written in meta:
            found[attribute] = meta[written]
    return found


def sub_dimension(
    dimension: Mapping[str, Any], key: str, granularity: CustomGranularity
) -> dict[str, Any]:
    derived: dict[str, Any] = {
        "name": time_intervals.sub_dimension_name(str(dimension["name"]), key),
        "label": granularity.label,
        "sql": granularity.sql.replace(COLUMN, str(dimension["sql"])),
        "type": granularity.type,
        "timeIntervalBaseDimensionName": dimension["name"],
    }
    for attribute in INHERITED:
        if attribute in dimension:
            derived[attribute] = dimension[attribute]
    return derived
