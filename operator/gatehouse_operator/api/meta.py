"""What every gatehouse.dev kind shares: the API group, conditions and the CRD's presentation.

Conditions follow cert-manager and the Kubernetes API conventions: a list keyed by ``type``, each
with status, a CamelCase reason, a message, the time of its last transition and the generation it
describes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from pydantic.alias_generators import to_camel

from gatehouse_operator.project_config.schema import rule

GROUP = "gatehouse.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

ConditionStatus = Literal["True", "False", "Unknown"]

# Names as Kubernetes spells them (RFC 1123): a label (a namespace), and a subdomain (most
# objects' names), as patterns and as the parts a longer pattern is made of.
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
DNS_LABEL = rf"^{_LABEL}$"
DNS_SUBDOMAIN = rf"^{_SUBDOMAIN}$"
# A value sealed to the operator (gatehouse seal), as the CRD checks its shape.
SEALED_VALUE = r"^gh1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$"


class Model(BaseModel):
    """Field names are snake_case in Python and camelCase on the wire, as Kubernetes spells them."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


def first_problem(error: ValidationError) -> tuple[str, str]:
    """The first problem pydantic found: the field's dotted path ("" for the whole), the rule
    (worded as for service.config.yml: a value not in a list or off a pattern is quoted)."""
    first = error.errors(include_url=False)[0]
    return ".".join(str(part) for part in first["loc"]), rule(first)


def spec_error(error: ValidationError) -> str:
    """The first problem in a spec, as ``spec.<path>: <rule>``, for a condition's message.

    The CRD schema refuses such specs at apply time; this covers objects stored before a
    schema change.
    """
    where, rule = first_problem(error)
    return f"spec.{where}: {rule}"


class Condition(Model):
    type: str = Field(
        max_length=316,
        pattern=rf"^({_SUBDOMAIN}/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        description="Type of condition in CamelCase, e.g. Ready.",
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        description="Why the condition last changed: a CamelCase word.",
    )
    message: str = Field(default="", max_length=32768, description="Details for a human.")
    last_transition_time: str = Field(
        json_schema_extra={"format": "date-time"},
        description="When status last changed.",
    )
    observed_generation: int = Field(
        default=0, ge=0, description="The .metadata.generation this condition describes."
    )


CONDITIONS_LIST: dict[str, JsonValue] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}


class Status(Model):
    """The status every kind writes; kinds extend it with fields of their own."""

    observed_generation: int = Field(
        default=0, ge=0, description="The .metadata.generation the operator last reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        json_schema_extra=CONDITIONS_LIST,
        description="The resource's current state, one condition per type; Ready summarises.",
    )


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0


def ready_columns() -> list[PrinterColumn]:
    """The columns that answer "is it working?" for every kind (cert-manager's pattern)."""
    return [
        PrinterColumn(
            "Ready",
            '.status.conditions[?(@.type=="Ready")].status',
            description="Whether the resource is fully reconciled and serving.",
        ),
        PrinterColumn(
            "Reason",
            '.status.conditions[?(@.type=="Ready")].reason',
            description="Why it is (not) ready.",
        ),
        PrinterColumn(
            "Message",
            '.status.conditions[?(@.type=="Ready")].message',
            priority=1,
            description="Details, with -o wide.",
        ),
    ]


@dataclass(frozen=True)
class Kind:
    """A gatehouse.dev kind: its models and how kubectl shows it."""

    kind: str
    plural: str
    description: str
    spec: type[BaseModel]
    # None for a record the operator writes whole and never reconciles (no status subresource).
    status: type[Status] | None
    short_names: tuple[str, ...] = ()
    columns: list[PrinterColumn] = field(default_factory=list)
    categories: tuple[str, ...] = ("gatehouse",)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"
