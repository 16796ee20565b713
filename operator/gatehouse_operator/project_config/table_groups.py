"""Table groups: the Explore sidebar's nested groups.

A model's ``meta.groups`` is the path of group keys it sits under, outermost first. A key that
``table_groups`` does not define is its own label. Nesting is limited to five levels, as in the
reference (which raised it from the seed's three); a deeper path is an error that names the
model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.project_config.schema import TableGroup

MAX_DEPTH = 5


class NestingError(GatehouseError, ValueError):
    pass


def label(key: str, groups: Mapping[str, TableGroup]) -> str:
    group = groups.get(key)
    return group.label if group is not None else key


def sidebar_path(model: str, keys: Sequence[str], groups: Mapping[str, TableGroup]) -> list[str]:
    """The labels of the groups ``model`` is nested under."""
    if len(keys) > MAX_DEPTH:
        raise NestingError(
            f"model {model!r}: meta.groups nests {len(keys)} levels deep "
            f"({' > '.join(keys)}); at most {MAX_DEPTH} are allowed"
        )
    return [label(key, groups) for key in keys]
