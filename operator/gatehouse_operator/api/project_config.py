"""ProjectConfig: a project's ``service.config.yml``, as a resource, compiled by the operator.

The spec is the file itself (its own snake_case keys), so the file pastes in unchanged. The
status says whether it compiled, lists the compile warnings (also Warning Events), and publishes
the compiled result: effective time intervals, labels, defaults, parameters and groups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import Field

from gatehouse_operator.api.meta import Kind, Model, PrinterColumn, Status, ready_columns
from gatehouse_operator.api.stored import as_mapping
from gatehouse_operator.project_config.compiler import Compiled
from gatehouse_operator.project_config.schema import CatalogModel, ServiceConfig, shortened
from gatehouse_operator.project_config.time_intervals import MAX_INTERVALS, CompileWarning

# Marks a preview of the project's file (``service preview``). A namespace is one project, with
# one ProjectConfig that is not a preview and any number that are.
PREVIEW_LABEL = "gatehouse.dev/preview"


# Admission hands the metadata over as sent, so each level is read as a mapping only if it is one.
def is_preview(metadata: Mapping[str, object]) -> bool:
    return as_mapping(metadata.get("labels")).get(PREVIEW_LABEL) == "true"


def becomes_the_project(metadata: Mapping[str, object], old: Mapping[str, object] | None) -> bool:
    """Whether a create or update makes this ProjectConfig its namespace's project file.

    Only that is checked against the others, so configs that predate the rule stay editable.
    """
    return not is_preview(metadata) and (old is None or is_preview(old))


def second_project(metadata: Mapping[str, object], others: Iterable[Mapping[str, object]]) -> str:
    """Why the namespace cannot have this project file besides another ('' when it can)."""
    names = sorted(
        str(other_meta.get("name"))
        for other_meta in (as_mapping(other.get("metadata")) for other in others)
        if other_meta.get("name") != metadata.get("name") and not is_preview(other_meta)
    )
    if not names:
        return ""
    return (
        f"the namespace already has the ProjectConfig {names[0]!r}, and a project has one "
        f"service.config.yml: deploy to that one (gatehouse-service deploy --name {names[0]}), "
        f'or label this one {PREVIEW_LABEL}: "true" to make it a preview'
    )


MAX_WARNINGS = 256
MAX_PATH = 256
MAX_MESSAGE = 1024


class CompileWarningStatus(Model):
    rule: str = Field(max_length=64, description="The spec's rule, e.g. SubDayIntervalOnDate.")
    path: str = Field(max_length=MAX_PATH, description="Where in the file.")
    message: str = Field(max_length=MAX_MESSAGE, description="What was dropped, and why.")


def fitted_warnings(warnings: Sequence[CompileWarning]) -> list[CompileWarning]:
    """``warnings`` as the status can hold them: long paths and messages (a name can be long)
    shortened, and past ``MAX_WARNINGS`` one warning that says how many more there are."""
    fitted = [
        CompileWarning(w.rule, shortened(w.path, MAX_PATH), shortened(w.message, MAX_MESSAGE))
        for w in warnings
    ]
    if len(fitted) <= MAX_WARNINGS:
        return fitted
    more = len(fitted) - MAX_WARNINGS + 1
    return [
        *fitted[: MAX_WARNINGS - 1],
        CompileWarning(
            "MoreWarnings",
            "",
            f"{more} more warnings are not listed: gatehouse-service validate shows them all",
        ),
    ]


class TimeIntervals(Model):
    date: list[str] = Field(
        default_factory=list,
        max_length=MAX_INTERVALS,
        description="The time intervals of date dimensions, standard and additional.",
    )
    timestamp: list[str] = Field(
        default_factory=list,
        max_length=MAX_INTERVALS,
        description="The time intervals of timestamp dimensions, standard and additional.",
    )


class CompiledConfig(Model):
    """The file as the service applies it, after defaults and the warnings' drops."""

    time_intervals: TimeIntervals = Field(
        default_factory=TimeIntervals, description="The effective time intervals per type."
    )
    granularity_labels: dict[str, str] = Field(
        default_factory=dict, description="The label of each time interval that has one."
    )
    defaults: dict[str, bool] = Field(
        default_factory=dict, description="The project's defaults, each set or defaulted."
    )
    parameters: list[str] = Field(default_factory=list, description="The parameters' names.")
    custom_granularities: list[str] = Field(
        default_factory=list, description="The custom granularities' names."
    )
    table_groups: list[str] = Field(default_factory=list, description="The table groups' names.")
    categories: list[str] = Field(
        default_factory=list, description="The spotlight categories' names."
    )
    default_visibility: str = Field(
        default="", description="The spotlight's default visibility: show or hide."
    )
    catalog: dict[str, CatalogModel] | None = Field(
        default=None,
        description="The models' and metrics' catalog settings as deployed (spec.catalog, "
        "without the dimension lists), less what the compile warnings dropped.",
    )

    @classmethod
    def of(cls, compiled: Compiled) -> CompiledConfig:
        """The compiled result as the status keeps it: names where the file has definitions."""
        # The catalog is passed only when deploy wrote one: the status writer leaves out what
        # was not set, so a project without a catalog has no catalog key, not a null one.
        catalog = (
            {}
            if compiled.catalog is None
            else {
                "catalog": {
                    # The models' own names and settings, as deploy wrote them (snake_case, as
                    # in the spec and explain), without the dimension lists and unset settings.
                    name: CatalogModel.model_validate(
                        model.model_dump(exclude_none=True, exclude={"dimensions"})
                    )
                    for name, model in compiled.catalog.items()
                }
            }
        )
        return cls(
            time_intervals=TimeIntervals.model_validate(compiled.time_intervals),
            granularity_labels=compiled.granularity_labels,
            defaults=compiled.defaults,
            parameters=sorted(compiled.parameters),
            custom_granularities=sorted(compiled.custom_granularities),
            table_groups=sorted(compiled.table_groups or {}),
            categories=sorted(compiled.categories),
            default_visibility=compiled.default_visibility,
            **catalog,
        )


class ProjectConfigStatus(Status):
    """Whether the file compiled, what it warned of, and what it compiled to."""

    project_uuid: str = Field(
        default="",
        max_length=64,
        description="The project's id in the service API (/api/v2/projects/{projectUuid}): "
        "this resource's metadata.uid.",
    )
    warnings: list[CompileWarningStatus] = Field(
        default_factory=list,
        max_length=256,
        description="What the compiler dropped or changed, also sent as Warning Events.",
    )
    compiled: CompiledConfig | None = Field(
        default=None, description="The compiled result, once the file compiles."
    )


PROJECT_CONFIG = Kind(
    kind="ProjectConfig",
    plural="projectconfigs",
    description="A project's service.config.yml (spotlight, parameters, defaults, custom "
    "granularities, table groups), validated and compiled by the Gatehouse operator.",
    spec=ServiceConfig,
    status=ProjectConfigStatus,
    short_names=("projcfg",),
    columns=[
        PrinterColumn("Project UUID", ".status.projectUuid", priority=1),
        PrinterColumn(
            "Warnings",
            ".status.warnings[*].rule",
            description="Compile warnings: see kubectl describe.",
        ),
        *ready_columns(),
    ],
)
