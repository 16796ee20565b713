"""The sections of ``service.config.yml`` with the file's own (snake_case) keys.

A ProjectConfig's spec is the file itself, so a file pastes in unchanged. Unknown keys are
refused everywhere (the reference implementation accepted and ignored them), whatever the client:
the CRD keeps them rather than pruning them (a client that does not ask for strict field
validation would otherwise lose a misspelt key without a word), and the admission webhook and the
operator refuse them, naming the key. Map keys that break their pattern are refused with the path
named, by the CRD's CEL rules and by these models; so is a custom granularity named like a
standard grain (by these models only: the webhook and the operator).

The spec's JSON is bounded (``MAX_SPEC_BYTES``) so that whatever validates also fits what the
API server stores.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError

from gatehouse_operator.cel import cel, validations
from gatehouse_operator.project_config import parameters, time_intervals

Visibility = Literal["show", "hide"]
Color = Literal["gray", "violet", "red", "orange", "green", "blue", "indigo", "pink", "yellow"]
GranularityType = Literal["date", "timestamp", "string"]
ParameterType = Literal["string", "number", "date"]

# Well within what the API server stores: 1.5 MiB an object, with its managed fields (about as
# large as the spec again) and its status.
MAX_SPEC_BYTES = 256 * 1024

PARAMETER_NAME = r"^[a-zA-Z0-9_-]+$"
CUSTOM_GRANULARITY_NAME = r"^[a-zA-Z0-9_]+$"
TABLE_GROUP_NAME = r"^[a-zA-Z0-9_-]+$"


def _not_a_standard_grain(name: str) -> str:
    """A custom granularity's name, unless it is a standard grain's (in any case): time intervals
    read such a name as the standard grain, so the granularity could never be offered, and its
    sub-dimension would take the standard one's name (``d_week``)."""
    grain = time_intervals.standard(name)
    if grain is not None:
        raise PydanticCustomError(
            "standard_grain",
            "{name} is the standard grain {grain}: time intervals read the name as that grain, "
            "so this granularity could never be offered; give it a name of its own",
            {"name": repr(name), "grain": grain},
        )
    return name


# Map keys are checked one by one, so an error names the key (and the CLI finds its line).
ParameterName = Annotated[str, Field(pattern=PARAMETER_NAME)]
CustomGranularityName = Annotated[
    str, Field(pattern=CUSTOM_GRANULARITY_NAME), AfterValidator(_not_a_standard_grain)
]
TableGroupName = Annotated[str, Field(pattern=TABLE_GROUP_NAME)]


def _keys_match(pattern: str, what: str) -> dict[str, JsonValue]:
    """A CEL rule for the CRD: every key of the map matches ``pattern``; and the map may be
    written with nothing under it (null, read as empty: see FileModel)."""
    return {
        **validations(
            cel(f"self.all(k, k.matches('{pattern}'))", f"{what} names must match {pattern}")
        ),
        **NULLABLE,
    }


# In the CRD: a section or list that may be written with nothing under it (see FileModel).
NULLABLE: dict[str, JsonValue] = {"nullable": True}


class StrictModel(BaseModel):
    # Strict: "yes" or 1 is not a boolean here, as the spec types say.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class FileModel(StrictModel):
    """A section of the file: in the CRD, an object that keeps unknown keys for the checks.

    A section or list written with nothing under it (``parameters:``, or ``spotlight:`` with every
    line under it commented out) is empty, as its author means, not an error: YAML reads it as
    null. Settings whose absence means something (``table_groups``, ``case_sensitive``...) default
    to null and stay null.
    """

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        return {
            key: _empty(cls.model_fields[key])
            if value is None and key in cls.model_fields
            else value
            for key, value in data.items()
        }


def _empty(field: FieldInfo) -> list[str] | dict[str, str] | None:
    """What a field written with no value stands for: an empty section or list, else null."""
    if field.default is None:
        return None
    annotation = field.annotation
    origin = get_origin(annotation)
    if origin is list:
        return []
    if origin is dict or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return {}
    return None


def oversize(spec: object, what: str = "the file") -> str:
    """Why ``spec`` (``what``: what it holds, as users know it) is too large to store ('' when
    it is not)."""
    size = len(json.dumps(spec, separators=(",", ":")))
    if size <= MAX_SPEC_BYTES:
        return ""
    return f"{what} is {size:,} bytes as JSON; at most {MAX_SPEC_BYTES:,} are stored"


def parsed_spec(spec: object, most: int = 10) -> tuple[ServiceConfig | None, list[str]]:
    """A ProjectConfig's spec as its model, or None and what is wrong with it, each as
    ``spec.<path>: <rule>``, at most ``most`` of them, each short enough for a condition's message
    whatever the names in the path."""
    if too_large := oversize(spec):
        return None, [f"spec: {too_large}"]
    try:
        return ServiceConfig.model_validate(spec), []
    except ValidationError as error:
        found = error.errors(include_url=False)
        problems = [
            shortened(f"spec.{'.'.join(str(part) for part in item['loc'])}: {rule(item)}", 512)
            for item in found[:most]
        ]
        if len(found) > most:
            problems.append(f"and {len(found) - most} more")
        return None, problems


def spec_problems(spec: object, most: int = 10) -> list[str]:
    """What is wrong with a ProjectConfig's spec (see ``parsed_spec``)."""
    return parsed_spec(spec, most)[1]


def rule(error: ErrorDetails) -> str:
    """The rule an error breaks, in words a file's author reads; for a value that is not one of
    a list, breaks a pattern or is not a boolean, with what was written, as a long CI log is read
    for it."""
    kind, context = error["type"], error.get("ctx", {})
    if kind == "extra_forbidden":
        return "unknown key (misspelt, or not a setting of this section)"
    if kind in ("bool_type", "bool_parsing"):
        return f"{written(error['input'])} is not a boolean: write true or false"
    if kind == "literal_error":
        return f"{written(error['input'])} is not one of {context['expected']}"
    if kind == "string_pattern_mismatch":
        return f"{written(error['input'])} does not match the pattern {context['pattern']!r}"
    return error["msg"]


def written(value: object) -> str:
    """What was written, quoted for a message, and short whatever its size."""
    return shortened(repr(value), 64)


def shortened(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


class Category(FileModel):
    label: str = Field(min_length=1, description="Shown in the Metrics Catalog.")
    color: Color = Field(default="gray", description="The category's colour.")


class Spotlight(FileModel):
    """The Metrics Catalog: which metrics show by default, and the categories models may use."""

    default_visibility: Visibility = Field(
        default="show",
        description="Whether metrics show in the Metrics Catalog unless a model or metric says "
        "otherwise.",
    )
    categories: dict[str, Category] = Field(
        default_factory=dict,
        json_schema_extra=NULLABLE,
        description="Categories model files may tag metrics with, by key.",
    )


Scalar = str | int | float | bool


class Option(FileModel):
    label: str = Field(min_length=1)
    value: Scalar


class OptionsFromDimension(FileModel):
    """The options are the values of a dimension."""

    model: str = Field(min_length=1, description="The model the dimension is in.")
    dimension: str = Field(min_length=1, description="The dimension whose values are offered.")


# Values may be strings, numbers or {label, value}: the CRD keeps them untyped (a structural
# schema has no unions) and the models check them.
_ANY_LIST = WithJsonSchema(
    {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}}
)
_ANY = WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True})


class Parameter(FileModel):
    """A value users pick that queries and SQL can reference. It needs options,
    options_from_dimension or allow_custom_values: true."""

    # Whether it has options, and its default (both untyped in the CRD, so out of CEL's reach),
    # the webhook and the operator check. A list default of one value without multiple is
    # accepted: the seed's own table shows list defaults, and one value is unambiguous.

    label: str = Field(min_length=1, description="Shown to users where they pick a value.")
    description: str = Field(default="", description="Shown to users beside the label.")
    type: ParameterType = Field(default="string", description="The values' type.")
    multiple: bool = Field(default=False, description="Whether users may pick several values.")
    allow_custom_values: bool = Field(
        default=False, description="Whether users may enter a value that is not an option."
    )
    options: Annotated[list[Scalar | Option] | None, _ANY_LIST] = Field(
        default=None, description="Values, or {label, value} pairs."
    )
    default: Annotated[Scalar | list[Scalar] | None, _ANY] = Field(
        default=None, description="A value, or a list of values when multiple is true."
    )
    options_from_dimension: OptionsFromDimension | None = Field(
        default=None, description="Take the options from a dimension's values."
    )

    @field_validator("default")
    @classmethod
    def _default_fits(
        cls, default: Scalar | list[Scalar] | None, info: ValidationInfo
    ) -> Scalar | list[Scalar] | None:
        """The default is of the type, among the options unless custom values are allowed, and
        a list of several values only when several may be picked."""
        if not isinstance(default, list):
            values = [default] if default is not None else []
        elif not default:
            raise _default_error("[] is an empty list: leave default out for no default")
        elif len(default) > 1 and info.data.get("multiple") is not True:
            raise _default_error(
                f"{written(default)} is a list of {len(default)} values, but multiple is not "
                "true: give one value, or set multiple: true"
            )
        else:
            values = default
        kind: ParameterType | None = info.data.get("type")
        options = info.data.get("options")
        if kind is None:
            return default
        for value in values:
            if problem := parameters.invalid(kind, value):
                raise _default_error(f"{written(value)} {problem}")
        if options is None or info.data.get("allow_custom_values"):
            return default
        offered = [option.value if isinstance(option, Option) else option for option in options]
        # A set: a file's many options and many defaults stay one pass each.
        comparable = {parameters.comparable(kind, option) for option in offered}
        for value in values:
            if parameters.comparable(kind, value) not in comparable:
                raise _default_error(
                    f"{written(value)} is not one of {_the_options(offered)} "
                    "(allow_custom_values is not true)"
                )
        return default

    @model_validator(mode="after")
    def _has_values(self) -> Parameter:
        sources = (self.options, self.options_from_dimension)
        if all(source is None for source in sources) and not self.allow_custom_values:
            raise ValueError(
                "a parameter needs options, options_from_dimension or allow_custom_values: true"
            )
        return self


def _default_error(message: str) -> PydanticCustomError:
    # The message is final: braces in what was written must not be read as placeholders.
    return PydanticCustomError("parameter_default", "{message}", {"message": message})


def _the_options(values: list[Scalar], most: int = 10) -> str:
    """``the options 'a', 'b' or 'c'``, or their count when there are more than ``most``."""
    if len(values) > most:
        return f"its {len(values)} options"
    shown = [written(value) for value in values]
    listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    return f"the options {listed}"


class AdditionalTimeIntervals(FileModel):
    date: list[str] = Field(
        default_factory=list,
        json_schema_extra=NULLABLE,
        description="Appended to date dimensions' intervals; sub-day grains are dropped.",
    )
    timestamp: list[str] = Field(
        default_factory=list,
        json_schema_extra=NULLABLE,
        description="Appended to timestamp dimensions' intervals.",
    )


class Defaults(FileModel):
    """Project-wide defaults; a dimension's or model's own setting wins over them."""

    case_sensitive: bool | None = Field(
        default=None, description="When false, string filters ignore case (default true)."
    )
    column_totals: bool | None = Field(
        default=None,
        description="When false, new queries skip the column totals query (default true).",
    )
    pre_aggregate_execution_fallback: bool | None = Field(
        default=None,
        description="Whether a failed pre-aggregate query is retried on the warehouse "
        "(default true).",
    )
    additional_time_intervals: AdditionalTimeIntervals | None = Field(
        default=None,
        description="Time intervals appended to the standard ones, for dimensions that do not "
        "list their own.",
    )
    granularity_labels: dict[str, str] = Field(
        default_factory=dict,
        json_schema_extra=NULLABLE,
        description="Display labels of standard granularities, by name.",
    )


class CustomGranularity(FileModel):
    label: str = Field(min_length=1, description="Shown in the date zoom dropdown.")
    sql: str = Field(min_length=1, description="${COLUMN} is replaced with the column's SQL.")
    type: GranularityType = Field(default="date", description="The expression's output type.")


class TableGroup(FileModel):
    label: str = Field(min_length=1, description="Shown in the Explore sidebar.")
    description: str = Field(default="", description="The group's description.")


class CatalogMetric(FileModel):
    """A metric's Metrics Catalog settings, resolved (what it inherits from its model filled
    in), as gatehouse-service explain shows them."""

    visibility: Visibility = Field(default="show", description="show or hide in the catalog.")
    categories: list[str] = Field(
        default_factory=list, description="Its model's categories and its own."
    )
    owner: str | None = Field(
        default=None, description="Its own owner, else its model's, else the model's meta.owner."
    )
    filter_by: list[str] | None = Field(
        default=None, description="The dimensions users may filter it by (absent: any)."
    )
    segment_by: list[str] | None = Field(
        default=None, description="The dimensions users may segment it by (absent: any)."
    )
    default_segment: str | None = Field(
        default=None, description="The dimension it is segmented by at first."
    )
    # Open: what a hand-edited spec sets against the rules is dropped with a warning (see
    # catalog.compiled), not refused. Empty is none, and is left out of what is written.
    default_filter: Annotated[dict[str, JsonValue], _ANY] = Field(
        default_factory=dict,
        exclude_if=lambda value: not value,
        description="One dimension and its value, filtered by at first.",
    )


class CatalogModel(FileModel):
    """A model's Metrics Catalog settings, resolved, with its dimensions' names (those its
    metrics' settings may name) and its metrics'."""

    visibility: Visibility = Field(default="show", description="show or hide in the catalog.")
    categories: list[str] = Field(default_factory=list, description="Its categories' keys.")
    owner: str | None = Field(default=None, description="Its spotlight.owner, else its meta.owner.")
    dimensions: list[str] = Field(
        default_factory=list,
        description="Its dimensions: its columns and what their time intervals become.",
    )
    metrics: dict[str, CatalogMetric] = Field(
        default_factory=dict, json_schema_extra=NULLABLE, description="Its metrics, by name."
    )


class ServiceConfig(FileModel):
    """The whole file. ``spotlight`` is required by the spec; everything else is optional."""

    # Nullable in the CRD, so that `spotlight:` with nothing under it reaches the checks (which
    # read it as empty) instead of being dropped and then missed as required.
    spotlight: Spotlight = Field(json_schema_extra=NULLABLE)
    parameters: dict[ParameterName, Parameter] = Field(
        default_factory=dict,
        json_schema_extra=_keys_match(PARAMETER_NAME, "parameter"),
        description="Project-wide parameters, by name.",
    )
    defaults: Defaults = Field(default_factory=Defaults, json_schema_extra=NULLABLE)
    custom_granularities: dict[CustomGranularityName, CustomGranularity] = Field(
        default_factory=dict,
        json_schema_extra=_keys_match(CUSTOM_GRANULARITY_NAME, "custom_granularities"),
        description="Date granularities of the project's own, by name; a dimension lists one "
        "in its time_intervals to offer it.",
    )
    # None (absent) and {} (present, empty) differ: deploy syncs table groups only when present.
    # Nullable in the CRD: server-side apply of `table_groups: {}` (clear them) stores null.
    table_groups: dict[TableGroupName, TableGroup] | None = Field(
        default=None,
        json_schema_extra=_keys_match(TABLE_GROUP_NAME, "table_groups"),
        description="Explore sidebar groups, by the key models list in meta.groups. Present "
        "and empty clears the deployed groups; absent leaves them.",
    )
    # Not a key of the file: deploy writes it from the models (under a field manager of its
    # own, as table groups), so the status can publish what the models' files say. Atomic: each
    # deploy replaces it whole, so a setting edited in by hand goes with the next deploy.
    catalog: dict[str, CatalogModel] | None = Field(
        default=None,
        json_schema_extra={**NULLABLE, "x-kubernetes-map-type": "atomic"},
        description="The models' and metrics' Metrics Catalog settings (meta.spotlight), "
        "resolved: written by gatehouse-service deploy from the dbt models, not by "
        "service.config.yml. Absent leaves the deployed catalog.",
    )
