"""The Metrics Catalog metadata of models and metrics (their ``spotlight``): checked, and resolved
as the catalog shows it.

A model's ``spotlight`` sets ``visibility``, ``categories`` and ``owner``, which its metrics
inherit. A metric's sets those and what the catalog's metric explorer offers:

- ``filter_by`` and ``segment_by``: the dimensions of the metric's model users may filter and
  segment it by (the reference fails its compile on an unknown one, and so do we);
- ``default_segment``: the dimension segmented by at first, one of ``segment_by`` when that is
  set;
- ``default_filter``: one dimension and its value, as the reference's metric filters write it
  (``{status: completed}``; a list of values, or null for "is null"), on a dimension of the model,
  one of ``filter_by`` when that is set.

Deploy sends the settings resolved, with each model's dimensions (``resolved``), as the
ProjectConfig's ``catalog``; the operator keeps them in the compiled status (``compiled``),
dropping with a warning what a hand-edited spec sets against these rules.

A metric's visibility is its own, else its model's, else the file's ``default_visibility``; its
categories are its model's and its own; its owner its own, else its model's ``spotlight.owner``,
else the model's ``meta.owner``. An owner that is not a string is ignored with a warning, as the
reference does. A dimension is a column of the model, or the dimension one of its time intervals
becomes (``ordered_at_month``, ``ordered_at_fiscal_quarter``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import get_args

from pydantic import JsonValue

from gatehouse_operator.project_config import time_intervals
from gatehouse_operator.project_config.dbt_project import Model, Place
from gatehouse_operator.project_config.findings import Findings, did_you_mean
from gatehouse_operator.project_config.schema import (
    CatalogMetric,
    CatalogModel,
    ServiceConfig,
    Visibility,
    written,
)
from gatehouse_operator.project_config.time_intervals import CompileWarning

VISIBILITIES: tuple[Visibility, ...] = get_args(Visibility)
MODEL_KEYS = ("visibility", "categories", "owner")
METRIC_KEYS = (*MODEL_KEYS, "filter_by", "segment_by", "default_segment", "default_filter")


@dataclass(frozen=True)
class Entry:
    """A model's or metric's catalog settings as the catalog shows them."""

    visibility: Visibility
    categories: list[str]
    owner: str | None
    owner_from: str = ""
    filter_by: list[str] | None = None
    segment_by: list[str] | None = None
    default_segment: str | None = None
    default_filter: dict[str, JsonValue] = field(default_factory=dict)

    def as_metric(self) -> CatalogMetric:
        """The metric's settings as the spec's ``catalog`` holds them."""
        return CatalogMetric(
            visibility=self.visibility,
            categories=self.categories,
            owner=self.owner,
            filter_by=self.filter_by,
            segment_by=self.segment_by,
            default_segment=self.default_segment,
            default_filter=self.default_filter,
        )

    def lines(self, indent: str) -> list[str]:
        owner = f", owner {self.owner} ({self.owner_from})" if self.owner else ""
        categories = f", categories {', '.join(self.categories)}" if self.categories else ""
        shown = [f"{indent}catalog: visibility {self.visibility}{categories}{owner}"]
        if self.filter_by is not None:
            shown.append(f"{indent}filter by: {', '.join(self.filter_by) or 'nothing'}")
        if self.segment_by is not None or self.default_segment:
            default = f" (default {self.default_segment})" if self.default_segment else ""
            listed = ", ".join(self.segment_by) if self.segment_by is not None else "any"
            shown.append(f"{indent}segment by: {listed or 'nothing'}{default}")
        shown += [
            f"{indent}default filter: {name}: {json.dumps(value)}"
            for name, value in self.default_filter.items()
        ]
        return shown


def _spotlight(meta: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    value = meta.get("spotlight")
    return value if isinstance(value, dict) else {}


def _names(value: JsonValue) -> list[str] | None:
    return [str(name) for name in value] if isinstance(value, list) else None


def _visibility(spotlight: Mapping[str, JsonValue], inherited: Visibility) -> Visibility:
    visibility = spotlight.get("visibility")
    return next((allowed for allowed in VISIBILITIES if allowed == visibility), inherited)


def _owner(spotlight: Mapping[str, JsonValue]) -> str | None:
    owner = spotlight.get("owner")
    return owner if isinstance(owner, str) else None


def model_entry(config: ServiceConfig, model: Model) -> Entry:
    spotlight = _spotlight(model.meta)
    owner, owner_from = _owner(spotlight), "the model's spotlight.owner"
    if owner is None and isinstance(meta_owner := model.meta.get("owner"), str):
        owner, owner_from = meta_owner, "the model's meta.owner"
    return Entry(
        visibility=_visibility(spotlight, config.spotlight.default_visibility),
        categories=_names(spotlight.get("categories")) or [],
        owner=owner,
        owner_from=owner_from,
    )


def metric_entry(model: Entry, meta: Mapping[str, JsonValue]) -> Entry:
    """A metric's settings, with what it inherits from its model's ``model``."""
    spotlight = _spotlight(meta)
    owner = _owner(spotlight)
    default_filter = spotlight.get("default_filter")
    default_segment = spotlight.get("default_segment")
    return Entry(
        visibility=_visibility(spotlight, model.visibility),
        categories=list(
            dict.fromkeys([*model.categories, *(_names(spotlight.get("categories")) or [])])
        ),
        owner=owner or model.owner,
        owner_from="the metric's spotlight.owner" if owner else model.owner_from,
        filter_by=_names(spotlight.get("filter_by")),
        segment_by=_names(spotlight.get("segment_by")),
        default_segment=default_segment if isinstance(default_segment, str) else None,
        default_filter=dict(default_filter) if isinstance(default_filter, dict) else {},
    )


def dimension_names(model: Model, intervals: Mapping[str, Sequence[str]]) -> list[str]:
    """The model's dimensions: its columns, and what their time intervals become
    (``intervals``: the project's compiled ones, by dimension type)."""
    names = []
    for dimension in model.dimensions:
        names.append(dimension.name)
        kind = dimension.time_type
        if kind is None:
            continue
        own = dimension.meta.get("time_intervals")
        names += [
            time_intervals.sub_dimension_name(dimension.name, interval)
            for interval in time_intervals.offered(kind, own, intervals[kind])
        ]
    return names


def _overrides(model: Model) -> Iterator[tuple[str, JsonValue, Place, tuple[str, ...]]]:
    """Each ``meta.spotlight`` of the model and its metrics: whose, the value, where, and the
    keys it may set."""
    if "spotlight" in model.meta:
        yield f"model {model.name}", model.meta["spotlight"], model.place, MODEL_KEYS
    for metric in model.all_metrics():
        if "spotlight" in metric.meta:
            subject = f"model {model.name}, metric {metric.name}"
            yield subject, metric.meta["spotlight"], metric.place, METRIC_KEYS


def check(
    config: ServiceConfig,
    model: Model,
    intervals: Mapping[str, Sequence[str]],
    found: Findings,
) -> None:
    """The model's and its metrics' catalog settings against the file's categories and the
    model's dimensions."""
    explorer: _Explorer | None = None  # made once, and only for a metric that names dimensions
    for subject, spotlight, place, keys in _overrides(model):
        if not isinstance(spotlight, dict):
            found.errors.append(
                f"{place.at('spotlight')}: {subject}: spotlight must be a mapping of "
                f"{', '.join(keys[:-1])} and {keys[-1]}, not {written(spotlight)}"
            )
            continue
        _keys(subject, spotlight, place, keys, found)
        _visibility_and_categories(config, subject, spotlight, place, found)
        if "owner" in spotlight and not isinstance(spotlight["owner"], str):
            found.warnings.append(
                f"{place.at('spotlight', 'owner')}: warning: {subject}: spotlight.owner: "
                f"{written(spotlight['owner'])} is not a string (a name or an email), so it is "
                "ignored"
            )
        if keys is METRIC_KEYS and any(key in spotlight for key in METRIC_KEYS[3:]):
            explorer = explorer or _Explorer(model.name, dimension_names(model, intervals))
            for key, rule in explorer.problems(spotlight):
                found.errors.append(
                    f"{place.at('spotlight', key)}: {subject}: spotlight.{key}: {rule}"
                )


def _keys(
    subject: str,
    spotlight: Mapping[str, JsonValue],
    place: Place,
    keys: tuple[str, ...],
    found: Findings,
) -> None:
    for key in spotlight:
        where = f"{place.at('spotlight', key)}: {subject}: spotlight.{key}"
        if key in keys:
            continue
        if key in METRIC_KEYS:
            found.errors.append(
                f"{where}: a metric's setting, not a model's (the reference reads it from each "
                "metric): set it in the spotlight of the metrics it is for"
            )
            continue
        sets = f"{', '.join(keys[:-1])} and {keys[-1]}"
        whose = "a metric" if keys is METRIC_KEYS else "a model"
        found.errors.append(
            f"{where}: unknown key ({whose} sets {sets}){did_you_mean(str(key), keys)}"
        )


def _visibility_and_categories(
    config: ServiceConfig,
    subject: str,
    spotlight: Mapping[str, JsonValue],
    place: Place,
    found: Findings,
) -> None:
    visibility = spotlight.get("visibility", "show")
    if visibility not in VISIBILITIES:
        found.errors.append(
            f"{place.at('spotlight', 'visibility')}: {subject}: spotlight.visibility: "
            f"{written(visibility)} is not one of {' or '.join(map(repr, VISIBILITIES))}"
        )
    if "categories" not in spotlight:
        return
    where = place.at("spotlight", "categories")
    categories = spotlight["categories"]
    if not isinstance(categories, list):
        found.errors.append(f"{where}: {subject}: spotlight.categories must be a list")
        return
    for category in categories:
        if rule := undefined(category, config.spotlight.categories):
            found.errors.append(f"{where}: {subject}: {rule}")


def undefined(category: JsonValue, defined: Iterable[str]) -> str:
    """Why ``category`` cannot be listed ('' when ``spotlight.categories`` defines it)."""
    if str(category) in defined:
        return ""
    return (
        f"the category {written(category)} is not defined in spotlight.categories"
        f"{did_you_mean(str(category), defined)}"
    )


@dataclass
class _Explorer:
    """What a metric offers in the catalog's explorer (``filter_by``, ``segment_by``,
    ``default_segment``, ``default_filter``), against its model's dimensions."""

    model: str
    dimensions: list[str]
    known: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.known = frozenset(self.dimensions)  # a metric may list many; each looked up once

    def problems(self, spotlight: Mapping[str, JsonValue]) -> Iterator[tuple[str, str]]:
        lists: dict[str, list[str]] = {}
        for key in ("filter_by", "segment_by"):
            if key in spotlight:
                listed = spotlight[key]
                names = (
                    [n for n in listed if isinstance(n, str)] if isinstance(listed, list) else []
                )
                if not isinstance(listed, list) or len(names) != len(listed):
                    yield key, f"must be a list of dimension names, not {written(listed)}"
                    continue
                lists[key] = names
                for name in names:
                    if rule := self.unknown(name):
                        yield key, rule
        segment = spotlight.get("default_segment")
        if "default_segment" in spotlight and (rule := self.chosen(segment, "segment_by", lists)):
            yield "default_segment", rule
        default = spotlight.get("default_filter")
        if "default_filter" in spotlight and (rule := self.default_filter(default, lists)):
            yield "default_filter", rule

    def unknown(self, name: str) -> str:
        """Why ``name`` is no dimension of the model ('' when it is one)."""
        if name in self.known:
            return ""
        return (
            f"{written(name)} is not a dimension of the model {self.model}"
            f"{did_you_mean(name, self.dimensions)}"
        )

    def chosen(self, name: JsonValue, among: str, lists: Mapping[str, list[str]]) -> str:
        """Why ``name`` cannot be the dimension a default is on ('' when it can): a dimension
        of the model, and one of ``among`` when that list is set."""
        if not isinstance(name, str):
            return f"must be a dimension's name, not {written(name)}"
        if rule := self.unknown(name):
            return rule
        if among in lists and name not in lists[among]:
            return f"{written(name)} is not one of {among} ({', '.join(lists[among]) or 'none'})"
        return ""

    def default_filter(self, value: JsonValue, lists: Mapping[str, list[str]]) -> str:
        """One dimension and its value: a string (the reference's filter syntax: ``!completed``,
        ``> 5``, ``%shop%``), a number, a boolean, null (is null), or a list of values (any of
        them)."""
        if not isinstance(value, dict) or len(value) != 1:
            return f"must be one dimension and its value (status: completed), not {written(value)}"
        [(name, value)] = value.items()
        if rule := self.chosen(name, "filter_by", lists):
            return rule
        values = value if isinstance(value, list) else [value]
        scalars = all(item is None or isinstance(item, (str, int, float, bool)) for item in values)
        if value == [] or not scalars:
            return (
                f"{written(value)} is not a value of {name}: give a value, a list of values or null"
            )
        return ""


def resolved(
    config: ServiceConfig, models: Iterable[Model], intervals: Mapping[str, Sequence[str]]
) -> dict[str, CatalogModel]:
    """The models' catalog settings as deploy sends them (the spec's ``catalog``): resolved as
    ``explain`` shows them, each model with its dimensions (``intervals``: the project's
    compiled ones, by dimension type)."""
    catalog: dict[str, CatalogModel] = {}
    for model in models:
        entry = model_entry(config, model)
        catalog[model.name] = CatalogModel(
            visibility=entry.visibility,
            categories=entry.categories,
            owner=entry.owner,
            dimensions=dimension_names(model, intervals),
            metrics={
                metric.name: metric_entry(entry, metric.meta).as_metric()
                for metric in model.all_metrics()
            },
        )
    return catalog


def compiled(config: ServiceConfig) -> tuple[dict[str, CatalogModel] | None, list[CompileWarning]]:
    """The deployed catalog as the status keeps it (None: none was deployed). Deploy checked
    it against the models; a spec edited by hand may still name a category the file does not
    define or a dimension its model lacks: that setting is dropped (unset), with a warning."""
    if config.catalog is None:
        return None, []
    warnings: list[CompileWarning] = []
    defined = config.spotlight.categories
    kept: dict[str, CatalogModel] = {}
    for name, model in config.catalog.items():
        path = f"catalog.{name}"
        explorer = _Explorer(name, model.dimensions)
        metrics: dict[str, CatalogMetric] = {}
        for metric_name, metric in model.metrics.items():
            where = f"{path}.metrics.{metric_name}"
            # The explorer's rules read the settings as a model's meta writes them.
            dropped: dict[str, object] = {}
            for key, rule in explorer.problems(metric.model_dump(exclude_none=True)):
                dropped[key] = CatalogMetric.model_fields[key].get_default(
                    call_default_factory=True
                )
                warnings.append(
                    CompileWarning("UnknownCatalogDimension", f"{where}.{key}", f"{key}: {rule}")
                )
            categories = _defined(metric.categories, defined, where, warnings)
            metrics[metric_name] = metric.model_copy(update={**dropped, "categories": categories})
        categories = _defined(model.categories, defined, path, warnings)
        kept[name] = model.model_copy(update={"categories": categories, "metrics": metrics})
    return kept, warnings


def _defined(
    categories: list[str],
    defined: Mapping[str, object],
    path: str,
    warnings: list[CompileWarning],
) -> list[str]:
    """``categories`` less those ``spotlight.categories`` does not define."""
    kept = []
    for category in categories:
        if rule := undefined(category, defined):
            warnings.append(CompileWarning("UnknownCatalogCategory", f"{path}.categories", rule))
        else:
            kept.append(category)
    return kept
