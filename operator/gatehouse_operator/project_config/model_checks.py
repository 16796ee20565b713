"""``service.config.yml`` checked against the dbt project's models: where users get hurt.

Errors (``validate`` exits 1, ``deploy`` and ``preview`` apply nothing):

- a ``${service.parameters.x}`` / ``${sv.parameters.x}`` anywhere in a model that names no
  parameter of the file or of the model (the reference left it raw in the SQL), with a "did you
  mean"; and a ``${sv.parameters.m.x}`` (a model's own parameter, named by its model) whose
  model ``m`` is not described, is neither the model nor one it joins, or has no parameter
  ``x``;
- a dimension's ``time_intervals`` entry that is neither a standard grain nor a custom
  granularity of the file (so removing a granularity a model still uses is refused);
- ``meta.groups`` nested deeper than five levels;
- a model's or metric's ``spotlight`` (its Metrics Catalog metadata, see ``catalog``) with a key
  it cannot set, a visibility that is not show or hide, a category ``spotlight.categories``
  lacks, or a metric's ``filter_by``, ``segment_by``, ``default_segment`` or ``default_filter``
  naming what is not a dimension of its model;
- a model's own parameter definition that breaks the file's parameter schema;
- a table or dimension ``case_sensitive`` that is not a boolean;
- ``options_from_dimension`` naming a dimension its (described) model does not have.

Warnings: a group key ``table_groups`` does not define (the key becomes its label), a sub-day
grain on a date dimension, ``options_from_dimension`` naming a model no ``.yml`` describes, a
``spotlight.owner`` that is not a string (ignored, as the reference does).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

from pydantic import JsonValue, ValidationError

from gatehouse_operator.project_config import catalog, parameters, table_groups, time_intervals
from gatehouse_operator.project_config.dbt_project import DbtProject, Dimension, Model, Place
from gatehouse_operator.project_config.findings import Findings, did_you_mean
from gatehouse_operator.project_config.schema import (
    PARAMETER_NAME,
    Parameter,
    ServiceConfig,
    rule,
)
from gatehouse_operator.project_config.yaml_source import Document

# What was meant as a parameter reference: any ${...} that starts with service. or sv.
_LOOKS_LIKE_A_REFERENCE = re.compile(r"\$\{\s*(?:service|sv)\.[^}]*\}", re.IGNORECASE)
# What the reference also accepts instead of a list: no time intervals, or the defaults.
INTERVAL_WORDS = ("OFF", "default")


def check(
    config: ServiceConfig,
    config_file: Document[JsonValue],
    project: DbtProject,
    intervals: Mapping[str, Sequence[str]],
) -> Findings:
    """``config`` (read from ``config_file``, its time intervals as compiled) against
    ``project``, each finding at its line."""
    found = Findings(errors=list(project.problems))
    for model in project.models.values():
        _parameter_references(config, model, project, found)
        _groups(config, model, found)
        catalog.check(config, model, intervals, found)
        _parameter_definitions(model, found)
        _case_sensitive(model.meta, model.place, f"model {model.name}", found)
        for dimension in model.dimensions:
            subject = f"model {model.name}, dimension {dimension.name}"
            _time_intervals(config, dimension, subject, found)
            _case_sensitive(dimension.meta, dimension.place, subject, found)
    _options_from_dimensions(config, config_file, project, found)
    return found


def _strings(value: JsonValue, location: tuple[str, ...]) -> Iterator[tuple[str, tuple[str, ...]]]:
    if isinstance(value, str):
        yield value, location
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*location, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*location, str(index)))


def model_parameters(model: Model) -> dict[str, JsonValue]:
    """The model's own parameters as written (``_parameter_definitions`` holds each to the
    file's parameter schema)."""
    own = model.meta.get("parameters")
    return own if isinstance(own, dict) else {}


def joined(model: Model) -> list[str]:
    """The models ``model`` joins (``meta.joins[].join``: a model's name, whatever its alias)."""
    joins = model.meta.get("joins")
    entries = joins if isinstance(joins, list) else []
    # A join that is not a name names no model (and, as a key, would not look one up).
    return [
        join
        for entry in entries
        if isinstance(entry, dict) and isinstance(join := entry.get("join"), str)
    ]


def scoped_parameters(model: Model, project: DbtProject) -> dict[str, JsonValue]:
    """The definitions a query of ``model`` may name as ``MODEL.NAME``: its own model's and its
    joined models' parameters, as the reference offers them."""
    scoped: dict[str, JsonValue] = {}
    for name in (model.name, *joined(model)):
        other = project.models.get(name)
        for parameter, definition in model_parameters(other).items() if other else ():
            scoped[f"{name}.{parameter}"] = definition
    return scoped


def _parameter_references(
    config: ServiceConfig, model: Model, project: DbtProject, found: Findings
) -> None:
    scoped = scoped_parameters(model, project)
    known = {*config.parameters, *model_parameters(model), *parameters.RESERVED, *scoped}
    entry_location = model.place.location[:2]  # ("models", index): the whole entry
    document = model.place.document
    for text, location in _strings(model.entry, entry_location):
        where = f"{document.path}:{document.line_of(location)}: model {model.name}"
        for written in _LOOKS_LIKE_A_REFERENCE.findall(text):
            if not parameters.REFERENCE.fullmatch(written):
                found.errors.append(
                    f"{where}: {written} is not a parameter reference, and would stay in the "
                    "SQL as written: write ${sv.parameters.NAME} or ${sv.parameters.MODEL.NAME}"
                )
        for name in parameters.references(text):
            if name in known:
                continue
            if "." in name:
                found.errors.append(f"{where}: {_unscoped(name, model, project)}")
                continue
            found.errors.append(
                f"{where}: ${{service.parameters.{name}}} names no parameter of "
                f"service.config.yml or of the model{did_you_mean(name, known)}"
            )


def _unscoped(name: str, model: Model, project: DbtProject) -> str:
    """Why ``MODEL.NAME`` names no parameter a query of ``model`` has."""
    written = f"${{service.parameters.{name}}}"
    owner_name, parameter = name.split(".")
    owner = project.models.get(owner_name)
    if owner is None:
        return (
            f"{written} names the model {owner_name!r}, which no .yml describes"
            f"{did_you_mean(owner_name, project.models)}"
        )
    defined = model_parameters(owner)
    if parameter not in defined:
        return (
            f"{written} names no parameter of the model {owner.name}"
            f"{did_you_mean(parameter, defined)}"
        )
    return (
        f"{written} is a parameter of the model {owner.name}, which {model.name} does not join "
        "(a query has only its own model's and its joined models' parameters)"
    )


def _groups(config: ServiceConfig, model: Model, found: Findings) -> None:
    written = model.meta.get("groups")
    if written is None:
        return
    where = model.place.at("groups")
    keys = [key for key in written if isinstance(key, str)] if isinstance(written, list) else []
    if not isinstance(written, list) or len(keys) != len(written):
        found.errors.append(f"{where}: model {model.name}: meta.groups must be a list of keys")
        return
    defined = config.table_groups or {}
    try:
        table_groups.sidebar_path(model.name, keys, defined)
    except table_groups.NestingError as error:
        found.errors.append(f"{where}: {error}")
    for key in keys:
        if key not in defined:
            found.warnings.append(
                f"{where}: warning: model {model.name}: the group {key!r} is not in "
                f"table_groups, so {key!r} is its label{did_you_mean(key, defined)}"
            )


def _parameter_definitions(model: Model, found: Findings) -> None:
    """A model's own parameters, held to the same schema as the file's."""
    for name, definition in model_parameters(model).items():
        subject = f"model {model.name}: parameters.{name}"
        if not re.fullmatch(PARAMETER_NAME, str(name)):
            found.errors.append(
                f"{model.place.at('parameters', str(name))}: {subject}: {str(name)!r} does not "
                f"match the pattern {PARAMETER_NAME!r}"
            )
        try:
            Parameter.model_validate(definition)
        except ValidationError as error:
            for item in error.errors(include_url=False):
                keys = [str(part) for part in item["loc"]]
                where = model.place.at("parameters", str(name), *keys)
                path = "".join(f".{key}" for key in keys)
                found.errors.append(f"{where}: {subject}{path}: {rule(item)}")


def _case_sensitive(
    meta: Mapping[str, JsonValue], place: Place, subject: str, found: Findings
) -> None:
    if "case_sensitive" in meta and not isinstance(meta["case_sensitive"], bool):
        found.errors.append(
            f"{place.at('case_sensitive')}: {subject}: case_sensitive must be true or false, "
            f"not {meta['case_sensitive']!r}"
        )


def _time_intervals(
    config: ServiceConfig, dimension: Dimension, subject: str, found: Findings
) -> None:
    if "time_intervals" not in dimension.meta:
        return
    names = dimension.meta["time_intervals"]
    where = dimension.place.at("time_intervals")
    if names in INTERVAL_WORDS:
        return
    if not isinstance(names, list):
        found.errors.append(
            f"{where}: {subject}: time_intervals must be a list, OFF or default, not {names!r}"
        )
        return
    customs = config.custom_granularities
    for name in names:
        if not isinstance(name, str):
            found.errors.append(f"{where}: {subject}: a time interval must be a name, not {name!r}")
            continue
        grain = time_intervals.standard(name)
        if grain is None and name not in customs:
            found.errors.append(
                f"{where}: {subject}: the time interval {name!r} is neither a standard grain nor "
                f"a custom granularity of service.config.yml"
                f"{did_you_mean(name, [*customs, *time_intervals.STANDARD_GRAINS])}"
            )
        elif grain in time_intervals.SUB_DAY_GRAINS and dimension.type == "date":
            found.warnings.append(
                f"{where}: warning: {subject}: the sub-day time interval {name!r} does not "
                "apply to a date dimension"
            )


def _options_from_dimensions(
    config: ServiceConfig, config_file: Document[JsonValue], project: DbtProject, found: Findings
) -> None:
    for name, parameter in config.parameters.items():
        source = parameter.options_from_dimension
        if source is None:
            continue
        place = Place(config_file, ("parameters", name, "options_from_dimension"))
        subject = f"parameter {name}: options_from_dimension"
        model = project.models.get(source.model)
        if model is None:
            found.warnings.append(
                f"{place.at('model')}: warning: {subject}: no model .yml describes {source.model!r}"
                f"{did_you_mean(source.model, project.models)}"
            )
        elif model.dimension(source.dimension) is None:
            columns = [dimension.name for dimension in model.dimensions]
            found.errors.append(
                f"{place.at('dimension')}: {subject}: the model {model.name} has no column "
                f"{source.dimension!r}{did_you_mean(source.dimension, columns)}"
            )
