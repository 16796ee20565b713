"""Compiles a ``service.config.yml`` into what consumers read, with the spec's warnings.

Validation (unknown keys, enums, patterns, required fields) happens in the models; compiling
drops what cannot apply and says so: sub-day grains under ``additional_time_intervals.date``,
names that are neither standard grains nor custom granularities, unknown ``granularity_labels``
keys, and catalog settings deploy did not check (see ``catalog.compiled``). Each warning names
its rule and its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import JsonValue

from gatehouse_operator.project_config import catalog, labels, time_intervals
from gatehouse_operator.project_config.schema import (
    CatalogModel,
    Category,
    CustomGranularity,
    Parameter,
    ServiceConfig,
    TableGroup,
)
from gatehouse_operator.project_config.time_intervals import CompileWarning


@dataclass(frozen=True)
class Compiled:
    time_intervals: dict[str, list[str]]
    granularity_labels: dict[str, str]
    defaults: dict[str, bool]
    parameters: dict[str, Parameter]
    custom_granularities: dict[str, CustomGranularity]
    table_groups: dict[str, TableGroup] | None
    categories: dict[str, Category]
    default_visibility: str
    catalog: dict[str, CatalogModel] | None = None
    warnings: list[CompileWarning] = field(default_factory=list)


BOOLEAN_DEFAULTS = ("case_sensitive", "column_totals", "pre_aggregate_execution_fallback")


def effective_defaults(defaults: Mapping[str, JsonValue]) -> dict[str, bool]:
    """The boolean defaults in force: the ones set, else the spec's ``true``."""
    return {
        name: value if isinstance(value := defaults.get(name), bool) else True
        for name in BOOLEAN_DEFAULTS
    }


def compile_config(config: ServiceConfig) -> Compiled:
    warnings: list[CompileWarning] = []
    additional = config.defaults.additional_time_intervals
    intervals: dict[str, list[str]] = {}
    for kind in ("date", "timestamp"):
        names = getattr(additional, kind) if additional else []
        kept, dropped = time_intervals.checked_additional(kind, names, config.custom_granularities)
        warnings += dropped
        intervals[kind], dropped = time_intervals.capped(kind, time_intervals.effective(kind, kept))
        warnings += dropped
    grain_labels, dropped = labels.checked_labels(config.defaults.granularity_labels)
    warnings += dropped
    models, dropped = catalog.compiled(config)
    warnings += dropped
    return Compiled(
        time_intervals=intervals,
        granularity_labels=grain_labels,
        defaults=effective_defaults(config.defaults.model_dump()),
        parameters=config.parameters,
        custom_granularities=config.custom_granularities,
        table_groups=config.table_groups,
        categories=config.spotlight.categories,
        default_visibility=config.spotlight.default_visibility,
        catalog=models,
        warnings=warnings,
    )
