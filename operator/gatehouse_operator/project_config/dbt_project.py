"""The dbt project beside ``service.config.yml``: its models as the file's rules see them.

``dbt_project.yml`` names the model folders (``model-paths``, default ``models``); every ``.yml``
and ``.yaml`` under them is read (as YAML 1.2, like the file) and its ``models:`` entries kept:
the model's ``meta`` (dbt's ``config.meta`` wins over it, as in dbt), and its columns with their
``meta.dimension`` and ``meta.metrics``. Each part remembers its file and line, so a problem
found later is reported where the user has to fix it.

A ``meta`` is the user's own YAML, whose shape dbt leaves open (any key, any value: the BI layer
reads some keys, other tools others), so it is kept as JSON's values; the checks (``model_checks``,
``catalog``) say which of the keys read here is written wrong, and where.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import JsonValue

from gatehouse_operator.project_config import yaml_source
from gatehouse_operator.project_config.time_intervals import DimensionType
from gatehouse_operator.project_config.yaml_source import Document, Location, YamlProblem

DBT_PROJECT = "dbt_project.yml"
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_FILES = 10_000
SKIPPED = {"dbt_packages", "target", "logs", "node_modules"}


@dataclass(frozen=True)
class Place:
    """A part of a file: the document and where in it."""

    document: Document[JsonValue]
    location: Location

    def line(self, *keys: str | int) -> int:
        return self.document.line_of((*self.location, *keys))

    def at(self, *keys: str | int) -> str:
        """``file:line`` of ``keys`` under this part (of the part itself, if they are absent)."""
        return f"{self.document.path}:{self.line(*keys)}"

    def under(self, *keys: str) -> Place:
        return Place(self.document, (*self.location, *keys))


@dataclass(frozen=True)
class Metric:
    name: str
    meta: dict[str, JsonValue]
    place: Place


@dataclass(frozen=True)
class Dimension:
    """A column as the BI layer sees it: its ``meta.dimension`` (empty when it has none)."""

    name: str
    meta: dict[str, JsonValue]
    place: Place  # the column's meta.dimension, or the column when it has none
    metrics: list[Metric] = field(default_factory=list)

    @property
    def sql(self) -> str:
        sql = self.meta.get("sql")
        return sql if isinstance(sql, str) else "${TABLE}." + self.name

    @property
    def type(self) -> str | None:
        kind = self.meta.get("type")
        return kind.lower() if isinstance(kind, str) else None

    @property
    def time_type(self) -> DimensionType | None:
        """``date`` or ``timestamp`` for the dimensions time intervals apply to."""
        if self.type == "date":
            return "date"
        if self.type == "timestamp":
            return "timestamp"
        return None


@dataclass(frozen=True)
class Model:
    name: str
    meta: dict[str, JsonValue]
    place: Place  # the model's meta (config.meta when it has one), or the model itself
    dimensions: list[Dimension]
    metrics: list[Metric]  # the model's own meta.metrics
    entry: dict[str, JsonValue]  # the whole entry as written: SQL may be anywhere in it

    def dimension(self, name: str) -> Dimension | None:
        return next((d for d in self.dimensions if d.name == name), None)

    def all_metrics(self) -> Iterator[Metric]:
        yield from self.metrics
        for dimension in self.dimensions:
            yield from dimension.metrics


@dataclass
class DbtProject:
    models: dict[str, Model] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # ``file:line: message``, errors


def read(project_dir: Path) -> DbtProject:
    project = DbtProject()
    try:
        settings = yaml_source.read(project_dir / DBT_PROJECT, MAX_FILE_BYTES)
    except YamlProblem as problem:
        project.problems.append(str(problem))
        return project
    data = settings.data if isinstance(settings.data, dict) else {}
    written = data.get("model-paths", data.get("source-paths", ["models"]))
    folders = [f for f in written if isinstance(f, str)] if isinstance(written, list) else []
    if not isinstance(written, list) or len(folders) != len(written):
        where = settings.line_of(("model-paths",))
        project.problems.append(f"{settings.path}:{where}: model-paths must be a list of folders")
        return project
    for path in _model_files(project_dir, folders, project):
        try:
            document = yaml_source.read(path, MAX_FILE_BYTES)
        except YamlProblem as problem:
            project.problems.append(str(problem))
            continue
        _add_models(document, project)
    return project


def _model_files(project_dir: Path, folders: list[str], project: DbtProject) -> list[Path]:
    found: dict[Path, None] = {}  # in order, once each: model paths may overlap
    for folder in folders:
        base = project_dir / folder
        for path in sorted(base.rglob("*")) if base.is_dir() else []:
            if SKIPPED.intersection(path.relative_to(base).parts):
                continue
            if path.suffix in (".yml", ".yaml") and path.is_file():
                found[path.resolve()] = None
            if len(found) > MAX_FILES:
                project.problems.append(
                    f"{base}:1: more than {MAX_FILES:,} YAML files under the model paths"
                )
                return []
    return list(found)


def _add_models(document: Document[JsonValue], project: DbtProject) -> None:
    data = document.data
    if not isinstance(data, dict) or "models" not in data:
        return  # sources, seeds, macros, selectors: no models here
    entries = data["models"]
    if not isinstance(entries, list):
        project.problems.append(
            f"{document.path}:{document.line_of(('models',))}: models must be a list"
        )
        return
    for index, entry in enumerate(entries):
        place = Place(document, ("models", str(index)))
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(name, str):
            project.problems.append(f"{place.at()}: a model needs a name")
            continue
        if name in project.models:
            first = project.models[name].place
            project.problems.append(
                f"{place.at('name')}: the model {name!r} is described twice "
                f"(first at {Place(first.document, first.location[:2]).at()})"
            )
            continue
        meta, meta_place = _meta(entry, place)
        columns = entry.get("columns")
        dimensions = [
            _dimension(column, column_name, place.under("columns", str(i)))
            for i, column in enumerate(columns if isinstance(columns, list) else [])
            if isinstance(column, dict) and isinstance(column_name := column.get("name"), str)
        ]
        project.models[name] = Model(
            name, meta, meta_place, dimensions, _metrics(meta.get("metrics"), meta_place), entry
        )


def _meta(entry: dict[str, JsonValue], place: Place) -> tuple[dict[str, JsonValue], Place]:
    """The entry's meta, dbt's ``config.meta`` over ``meta``, and where it is written."""
    meta = _mapping(entry.get("meta"))
    config_meta = _mapping(entry.get("config")).get("meta")
    if isinstance(config_meta, dict):
        return {**meta, **config_meta}, place.under("config", "meta")
    if meta:
        return dict(meta), place.under("meta")
    return {}, place


def _mapping(value: JsonValue) -> dict[str, JsonValue]:
    return value if isinstance(value, dict) else {}


def _dimension(column: dict[str, JsonValue], name: str, place: Place) -> Dimension:
    meta, meta_place = _meta(column, place)
    dimension = meta.get("dimension")
    metrics = _metrics(meta.get("metrics"), meta_place)
    if isinstance(dimension, dict):
        return Dimension(name, dimension, meta_place.under("dimension"), metrics)
    return Dimension(name, {}, place, metrics)


def _metrics(metrics: JsonValue, place: Place) -> list[Metric]:
    if not isinstance(metrics, dict):
        return []
    return [
        Metric(str(name), meta if isinstance(meta, dict) else {}, place.under("metrics", name))
        for name, meta in metrics.items()
    ]
