"""The sections of ``service.config.yml`` with the file's own (snake_case) keys.

A ProjectConfig's spec is the file itself, so a file pastes in unchanged. Unknown keys are
refused everywhere (the reference implementation accepted and ignored them); map keys that break
their pattern are refused with the path named, by the CRD's CEL rules and by these models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from gatehouse_operator.api.meta import cel, validations

Color = Literal["gray", "violet", "red", "orange", "green", "blue", "indigo", "pink", "yellow"]
GranularityType = Literal["date", "timestamp", "string"]
ParameterType = Literal["string", "number", "date"]

PARAMETER_NAME = r"^[a-zA-Z0-9_-]+$"
CUSTOM_GRANULARITY_NAME = r"^[a-zA-Z0-9_]+$"
TABLE_GROUP_NAME = r"^[a-zA-Z0-9_-]+$"


def _keys_match(pattern: str, what: str) -> dict[str, Any]:
    """A CEL rule for the CRD: every key of the map matches ``pattern``."""
    return validations(
        cel(f"self.all(k, k.matches('{pattern}'))", f"{what} names must match {pattern}")
    )


class FileModel(BaseModel):
    # Strict: YAML "yes" or "1" is not a boolean here, as the spec types say.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Category(FileModel):
    label: str = Field(min_length=1, max_length=256, description="Shown in the Metrics Catalog.")
    color: Color = "gray"


class Spotlight(FileModel):
    default_visibility: Literal["show", "hide"] = "show"
    categories: dict[str, Category] = Field(default_factory=dict)


Scalar = str | int | float | bool


class Option(FileModel):
    label: str = Field(min_length=1)
    value: Scalar


class OptionsFromDimension(FileModel):
    model: str = Field(min_length=1)
    dimension: str = Field(min_length=1)


# Values may be strings, numbers or {label, value}: the CRD keeps them untyped (a structural
# schema has no unions) and the models check them.
_ANY_LIST = WithJsonSchema(
    {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}}
)
_ANY = WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True})


class Parameter(FileModel):
    """Whether it has options (untyped in the CRD, so out of CEL's reach) the operator checks."""

    label: str = Field(min_length=1, max_length=256)
    description: str = ""
    type: ParameterType = "string"
    multiple: bool = False
    allow_custom_values: bool = False
    options: Annotated[list[Scalar | Option] | None, _ANY_LIST] = Field(
        default=None, description="Values, or {label, value} pairs."
    )
    default: Annotated[Scalar | list[Scalar] | None, _ANY] = Field(
        default=None, description="A value, or a list of values when multiple is true."
    )
    options_from_dimension: OptionsFromDimension | None = None

    @model_validator(mode="after")
    def _has_values(self) -> Parameter:
        sources = (self.options, self.options_from_dimension)
        if all(source is None for source in sources) and not self.allow_custom_values:
            raise ValueError(
                "a parameter needs options, options_from_dimension or allow_custom_values: true"
            )
        if isinstance(self.default, list) and not self.multiple:
            raise ValueError("default is a list, so multiple must be true")
        return self


class AdditionalTimeIntervals(FileModel):
    date: list[str] = Field(default_factory=list)
    timestamp: list[str] = Field(default_factory=list)


class Defaults(FileModel):
    case_sensitive: bool | None = None
    column_totals: bool | None = None
    pre_aggregate_execution_fallback: bool | None = None
    additional_time_intervals: AdditionalTimeIntervals | None = None
    granularity_labels: dict[str, str] = Field(default_factory=dict)


class CustomGranularity(FileModel):
    label: str = Field(min_length=1, max_length=256)
    sql: str = Field(min_length=1, description="${COLUMN} is replaced with the column's SQL.")
    type: GranularityType = "date"


class TableGroup(FileModel):
    label: str = Field(min_length=1, max_length=256)
    description: str = ""


# Map keys are checked one by one, so an error names the key (and the CLI finds its line).
ParameterName = Annotated[str, Field(pattern=PARAMETER_NAME)]
CustomGranularityName = Annotated[str, Field(pattern=CUSTOM_GRANULARITY_NAME)]
TableGroupName = Annotated[str, Field(pattern=TABLE_GROUP_NAME)]


class ServiceConfig(FileModel):
    """The whole file. ``spotlight`` is required by the spec; everything else is optional."""

    spotlight: Spotlight
    parameters: dict[ParameterName, Parameter] = Field(
        default_factory=dict, json_schema_extra=_keys_match(PARAMETER_NAME, "parameter")
    )
    defaults: Defaults = Field(default_factory=Defaults)
    custom_granularities: dict[CustomGranularityName, CustomGranularity] = Field(
        default_factory=dict,
        json_schema_extra=_keys_match(CUSTOM_GRANULARITY_NAME, "custom_granularities"),
    )
    # None (absent) and {} (present, empty) differ: deploy syncs table groups only when present.
    # Nullable in the CRD: server-side apply of `table_groups: {}` (clear them) stores null.
    table_groups: dict[TableGroupName, TableGroup] | None = Field(
        default=None,
        json_schema_extra={**_keys_match(TABLE_GROUP_NAME, "table_groups"), "nullable": True},
    )
