"""``gatehouse-service explain MODEL[.DIMENSION]``: what the file's rules resolve to for one model.

For a dimension: its type and SQL, case sensitivity and the level it comes from, its effective
time intervals (its own list, or the built-ins plus ``additional_time_intervals``) with their
labels, the sub-dimensions its custom granularities become, with their SQL. For a model: its group
path in the sidebar, its case sensitivity, its dimensions, its Metrics Catalog settings, and its
metrics with theirs (visibility, categories and owner, inherited where the metric sets none;
what users may filter and segment it by, and its defaults). Every SQL is shown with the
parameters' defaults substituted, typed and quoted as a query would get them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import JsonValue, ValidationError

from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.project_config import (
    case_sensitivity,
    catalog,
    custom_granularities,
    labels,
    parameters,
    table_groups,
    time_intervals,
)
from gatehouse_operator.project_config.compiler import compile_config
from gatehouse_operator.project_config.dbt_project import DbtProject, Dimension, Model
from gatehouse_operator.project_config.findings import did_you_mean
from gatehouse_operator.project_config.model_checks import model_parameters, scoped_parameters
from gatehouse_operator.project_config.schema import Parameter, ServiceConfig


class NotFound(GatehouseError, LookupError):
    """The model or dimension asked for is not in the project; the message says what is."""


def explain(config: ServiceConfig, project: DbtProject, target: str) -> list[str]:
    model_name, _, dimension_name = target.partition(".")
    model = project.models.get(model_name)
    if model is None:
        raise NotFound(
            f"no model .yml describes {model_name!r}{did_you_mean(model_name, project.models)}"
        )
    if not dimension_name:
        return _model(config, project, model)
    dimension = model.dimension(dimension_name)
    if dimension is None:
        names = [d.name for d in model.dimensions]
        raise NotFound(
            f"the model {model.name} has no column {dimension_name!r}"
            f"{did_you_mean(dimension_name, names)}"
        )
    return _dimension(config, project, model, dimension)


def _model(config: ServiceConfig, project: DbtProject, model: Model) -> list[str]:
    lines = [f"model {model.name} ({model.place.at()})"]
    groups = model.meta.get("groups")
    if isinstance(groups, list) and groups:
        keys = [str(key) for key in groups]
        try:
            path = table_groups.sidebar_path(model.name, keys, config.table_groups or {})
            lines.append(f"  sidebar: {' > '.join(path)}  (meta.groups: {' > '.join(keys)})")
        except table_groups.NestingError as error:
            lines.append(f"  sidebar: {error}")
    else:
        lines.append("  sidebar: not in a group")
    sensitive, level = case_sensitivity.case_sensitive(
        None, _boolean(model.meta, "case_sensitive"), config.defaults.case_sensitive
    )
    lines.append(f"  case sensitive: {_yes(sensitive)}  (from {level})")
    lines.append(f"  dimensions: {', '.join(d.name for d in model.dimensions) or 'none described'}")
    for key in ("sql_filter", "sql_where"):
        if isinstance(sql := model.meta.get(key), str):
            lines.append(f"  {key}: {_substituted(config, project, model, sql)}")
    entry = catalog.model_entry(config, model)
    lines += entry.lines("  ")
    for metric in model.all_metrics():
        sql = metric.meta.get("sql")
        kind = metric.meta.get("type", "")
        shown = (
            _substituted(config, project, model, sql) if isinstance(sql, str) else "(the column)"
        )
        lines.append(f"  metric {metric.name} ({kind}): {shown}")
        lines += catalog.metric_entry(entry, metric.meta).lines("    ")
    return lines


def _dimension(
    config: ServiceConfig, project: DbtProject, model: Model, dimension: Dimension
) -> list[str]:
    kind = dimension.time_type
    lines = [
        f"dimension {model.name}.{dimension.name} ({dimension.place.at()})",
        f"  type: {dimension.type or 'from the warehouse (no meta.dimension.type)'}",
        f"  sql: {_substituted(config, project, model, dimension.sql)}",
    ]
    sensitive, level = case_sensitivity.case_sensitive(
        _boolean(dimension.meta, "case_sensitive"),
        _boolean(model.meta, "case_sensitive"),
        config.defaults.case_sensitive,
    )
    lines.append(f"  case sensitive: {_yes(sensitive)}  (from {level})")
    if kind is None:
        return lines
    own = dimension.meta.get("time_intervals")
    compiled = compile_config(config)
    if own == "OFF":
        lines.append("  time intervals: none  (time_intervals: OFF)")
        return lines
    intervals = time_intervals.offered(kind, own, compiled.time_intervals[kind])
    if isinstance(own, list):
        source = "the dimension's own time_intervals"
    else:
        source = f"built-ins + defaults.additional_time_intervals.{kind}"
    lines.append(f"  time intervals: {', '.join(intervals)}  (from {source})")
    label = str(dimension.meta.get("label") or dimension.name.replace("_", " ").capitalize())
    for name in intervals:
        granularity = config.custom_granularities.get(name)
        if granularity is None:
            shown = labels.dimension_label(label, name, compiled.granularity_labels)
            lines.append(f"    {name}: {shown}")
            continue
        base = custom_granularities.parent(dimension.name, dimension.sql, dimension.meta)
        derived = custom_granularities.sub_dimension(base, name, granularity)
        sql = _substituted(config, project, model, str(derived["sql"]))
        lines.append(
            f"    {name}: {derived['label']} -> {derived['name']} ({derived['type']}): {sql}"
        )
        lines += [
            f"      {attribute} (inherited from {dimension.name}): "
            f"{json.dumps(derived[attribute], sort_keys=True)}"
            for attribute in custom_granularities.INHERITED
            if attribute in derived
        ]
    return lines


def _substituted(config: ServiceConfig, project: DbtProject, model: Model, sql: str) -> str:
    defined = dict(config.parameters)
    # The model's own by their name, and (with its joined models') by MODEL.NAME. The checks,
    # which run first, refuse a definition that breaks the file's parameter schema.
    for name, definition in {
        **model_parameters(model),
        **scoped_parameters(model, project),
    }.items():
        try:
            defined[name] = Parameter.model_validate(definition)
        except ValidationError:
            continue
    values = {name: parameter.default for name, parameter in defined.items()}
    types = {name: parameter.type for name, parameter in defined.items()}
    try:
        return parameters.substitute(sql, values, types)
    except parameters.ParameterError as error:
        return f"{sql}  (not substituted: {error})"


def _boolean(meta: Mapping[str, JsonValue], key: str) -> bool | None:
    value = meta.get(key)
    return value if isinstance(value, bool) else None


def _yes(value: bool) -> str:
    return "true" if value else "false"
