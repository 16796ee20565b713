"""Time intervals of date and timestamp dimensions.

Built-ins first (date: DAY WEEK MONTH QUARTER YEAR; timestamp: RAW and the same), then the
project's ``defaults.additional_time_intervals`` appended and de-duplicated. Standard grains (the
reference's whole ``TimeFrames`` list, parts of a date such as ``MONTH_NAME`` included) are
accepted in any case and kept upper-case; custom granularity keys are kept as written. A dimension
that lists its own ``time_intervals`` uses exactly that list. The compile-time checks drop what
cannot apply, each with the spec's warning.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

DimensionType = Literal["date", "timestamp"]

# The reference's TimeFrames, in its order: the truncations, then the parts of a date or time
# (numbers and names: DAY_OF_WEEK_INDEX 0 = Monday, MONTH_NAME September, QUARTER_NAME Q3).
STANDARD_GRAINS = (
    "RAW",
    "YEAR",
    "QUARTER",
    "MONTH",
    "WEEK",
    "DAY",
    "HOUR",
    "MINUTE",
    "SECOND",
    "MILLISECOND",
    "DAY_OF_WEEK_INDEX",
    "DAY_OF_MONTH_NUM",
    "DAY_OF_YEAR_NUM",
    "WEEK_NUM",
    "MONTH_NUM",
    "QUARTER_NUM",
    "YEAR_NUM",
    "DAY_OF_WEEK_NAME",
    "MONTH_NAME",
    "QUARTER_NAME",
    "HOUR_OF_DAY_NUM",
    "MINUTE_OF_HOUR_NUM",
)
MAX_INTERVALS = 64  # a dimension's zoom options: what the status lists, and far past any use
# What a date has no value for: the time of day, at any grain or as a part.
SUB_DAY_GRAINS = frozenset(
    {"RAW", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "HOUR_OF_DAY_NUM", "MINUTE_OF_HOUR_NUM"}
)
BUILT_IN: dict[DimensionType, tuple[str, ...]] = {
    "date": ("DAY", "WEEK", "MONTH", "QUARTER", "YEAR"),
    "timestamp": ("RAW", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR"),
}


@dataclass(frozen=True)
class CompileWarning:
    """A compile warning: the rule it comes from, where, and the message users see."""

    rule: str
    path: str
    message: str


def standard(name: str) -> str | None:
    """The standard grain ``name`` stands for (case-insensitive), or None."""
    upper = name.upper()
    return upper if upper in STANDARD_GRAINS else None


def checked_additional(
    kind: DimensionType, names: Iterable[str], custom_keys: Iterable[str]
) -> tuple[list[str], list[CompileWarning]]:
    """The additional intervals of ``kind`` that apply, and a warning for each one dropped."""
    customs = set(custom_keys)
    path = f"defaults.additional_time_intervals.{kind}"
    kept: list[str] = []
    warnings: list[CompileWarning] = []
    for name in names:
        grain = standard(name)
        if grain is not None and kind == "date" and grain in SUB_DAY_GRAINS:
            warnings.append(
                CompileWarning(
                    "SubDayIntervalOnDate",
                    path,
                    f'Ignoring sub-day time interval "{name}" in {path} — not valid for DATE '
                    "dimensions.",
                )
            )
        elif grain is not None:
            kept.append(grain)
        elif name in customs:
            kept.append(name)
        else:
            warnings.append(
                CompileWarning(
                    "UnknownTimeInterval",
                    path,
                    f'Ignoring unknown time interval "{name}" in {path} — not a standard '
                    "granularity or a defined custom_granularity.",
                )
            )
    return kept, warnings


def effective(
    kind: DimensionType,
    additional: Sequence[str],
    dimension_intervals: Sequence[str] | None = None,
) -> list[str]:
    """The intervals a dimension offers: its own list if it has one, else built-ins + additional.

    ``additional`` is the checked list from :func:`checked_additional`.
    """
    if dimension_intervals is not None:
        return [standard(name) or name for name in dimension_intervals]
    return list(dict.fromkeys([*BUILT_IN[kind], *additional]))


def offered(kind: DimensionType, own: object, project: Sequence[str]) -> list[str]:
    """The intervals a dimension offers, from its own ``time_intervals`` (a list; ``OFF`` for
    none; absent or ``default`` for the project's compiled ``project`` list)."""
    if own == "OFF":
        return []
    if isinstance(own, list):
        return effective(kind, [], [str(name) for name in own])
    return list(project)


def sub_dimension_name(dimension: str, interval: str) -> str:
    """The dimension an interval of ``dimension`` becomes: a standard grain's name in lower case
    (``ordered_at_month``), a custom granularity's key as written."""
    grain = standard(interval)
    return f"{dimension}_{grain.lower() if grain else interval}"


def capped(kind: DimensionType, intervals: list[str]) -> tuple[list[str], list[CompileWarning]]:
    """The first ``MAX_INTERVALS`` of ``intervals``, and a warning if there were more."""
    if len(intervals) <= MAX_INTERVALS:
        return intervals, []
    path = f"defaults.additional_time_intervals.{kind}"
    dropped = len(intervals) - MAX_INTERVALS
    return intervals[:MAX_INTERVALS], [
        CompileWarning(
            "TooManyTimeIntervals",
            path,
            f"Ignoring the last {dropped} time intervals in {path} — a dimension offers at "
            f"most {MAX_INTERVALS}.",
        )
    ]
