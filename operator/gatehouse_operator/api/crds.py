"""Generates the CustomResourceDefinitions from the typed models: the models are the one source.

Kubernetes wants *structural* schemas: every node typed, no ``$ref``, no ``anyOf`` with null, no
``additionalProperties: false``. Pydantic's JSON Schema has all three, so it is rewritten here.
``python -m gatehouse_operator.api.crds`` writes ``crds/`` and the chart's copy; a test fails when
the files differ from what the models generate.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal, TypedDict

import yaml
from pydantic import BaseModel, JsonValue

from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.connection_sample import CONNECTION_SAMPLE
from gatehouse_operator.api.connection_test import CONNECTION_TEST
from gatehouse_operator.api.meta import GROUP, VERSION, Kind, PrinterColumn
from gatehouse_operator.api.project_config import PROJECT_CONFIG
from gatehouse_operator.api.sign_in_request import SIGN_IN_REQUEST
from gatehouse_operator.errors import GatehouseError

KINDS = (
    EXTERNAL_CONNECTION,
    DATA_APP,
    CHART_TYPE,
    CONNECTION_TEST,
    CONNECTION_SAMPLE,
    PROJECT_CONFIG,
    SIGN_IN_REQUEST,
)

# Keywords a structural schema may carry over from JSON Schema as they are.
_KEPT = {
    "type",
    "description",
    "format",
    "enum",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "required",
    "nullable",
}


class SchemaError(GatehouseError, ValueError):
    """A model uses a construct a structural schema cannot express."""


# A JSON Schema (pydantic's, or the structural one made of it): open in shape, narrowed where read.
Schema = dict[str, JsonValue]


def _schema(value: JsonValue) -> Schema:
    if not isinstance(value, dict):
        raise SchemaError(f"not a schema: {value!r}")
    return value


def structural(node: Schema, defs: Schema, *, defaults: bool = True) -> Schema:
    if "$ref" in node:
        target = _schema(defs[str(node["$ref"]).rsplit("/", 1)[-1]])
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        return structural({**target, **siblings}, defs, defaults=defaults)
    if "anyOf" in node:
        union = node["anyOf"]
        options = [
            option
            for option in map(_schema, union if isinstance(union, list) else [])
            if option.get("type") != "null"
        ]
        if len(options) != 1:
            raise SchemaError(f"unions are not structural: {union}")
        siblings = {key: value for key, value in node.items() if key != "anyOf"}
        return structural({**options[0], **siblings}, defs, defaults=defaults)

    out: Schema = {}
    for key, value in node.items():
        if key == "default" and (value is None or not defaults):
            continue
        if key in _KEPT or key.startswith("x-kubernetes-"):
            out[key] = value
        elif key == "const":
            out["enum"] = [value]
    if "properties" in node:
        out["type"] = "object"
        out["properties"] = {
            name: structural(_schema(child), defs, defaults=defaults)
            for name, child in _schema(node["properties"]).items()
        }
    if "items" in node:
        out["items"] = structural(_schema(node["items"]), defs, defaults=defaults)
    extra = node.get("additionalProperties")
    # A map with a key pattern: the values' schema is kept, the pattern is left to a CEL rule
    # (structural schemas have no patternProperties).
    patterned = list(_schema(node.get("patternProperties") or {}).values())
    if len(patterned) > 1:
        raise SchemaError(f"a map may have one key pattern: {node['patternProperties']}")
    if patterned:
        extra = patterned[0]
    if isinstance(extra, dict):
        out["additionalProperties"] = structural(extra, defs, defaults=defaults)
    # Arbitrary JSON (a ConnectionTest's body) is the one node a structural schema leaves untyped.
    if "type" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        raise SchemaError(f"untyped schema node: {node}")
    return out


def model_schema(model: type[BaseModel], *, defaults: bool = True) -> Schema:
    raw: Schema = model.model_json_schema(by_alias=True, mode="validation")
    return structural(raw, _schema(raw.get("$defs", {})), defaults=defaults)


# What every Kubernetes object's first fields mean, worded as the API conventions do.
_CONVENTIONS = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
_OBJECT_FIELDS: Schema = {
    "apiVersion": {
        "type": "string",
        "description": "The versioned schema of this representation of an object. More info: "
        f"{_CONVENTIONS}#resources",
    },
    "kind": {
        "type": "string",
        "description": "The REST resource this object represents. More info: "
        f"{_CONVENTIONS}#types-kinds",
    },
    # The API server refuses anything but the type here: it describes ObjectMeta itself.
    "metadata": {"type": "object"},
}


class Names(TypedDict):
    kind: str
    listKind: str
    plural: str
    singular: str
    shortNames: list[str]
    categories: list[str]


class Column(TypedDict, total=False):
    """An additionalPrinterColumns entry; description and priority only when set."""

    name: str
    type: str
    jsonPath: str
    description: str
    priority: int


class Validation(TypedDict):
    openAPIV3Schema: Schema


class Version(TypedDict, total=False):
    """A served version; subresources only for a kind with a status (keys in the file's order)."""

    name: str
    served: bool
    storage: bool
    subresources: dict[str, dict[str, str]]
    additionalPrinterColumns: list[Column]
    schema: Validation


class CrdSpec(TypedDict):
    group: str
    scope: Literal["Namespaced"]
    names: Names
    versions: list[Version]


class CrdMetadata(TypedDict):
    name: str


class CustomResourceDefinition(TypedDict):
    apiVersion: Literal["apiextensions.k8s.io/v1"]
    kind: Literal["CustomResourceDefinition"]
    metadata: CrdMetadata
    spec: CrdSpec


def _column(column: PrinterColumn) -> Column:
    out: Column = {"name": column.name, "type": column.type, "jsonPath": column.json_path}
    if column.description:
        out["description"] = column.description
    if column.priority:
        out["priority"] = column.priority
    return out


def _version(kind: Kind, properties: Schema) -> Version:
    version: Version = {"name": VERSION, "served": True, "storage": True}
    if kind.status is not None:
        version["subresources"] = {"status": {}}
    version["additionalPrinterColumns"] = [_column(column) for column in kind.columns] + [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]
    version["schema"] = {
        "openAPIV3Schema": {
            "type": "object",
            "description": kind.description,
            "required": ["spec"],
            "properties": properties,
        }
    }
    return version


def definition(kind: Kind) -> CustomResourceDefinition:
    properties: Schema = {**_OBJECT_FIELDS, "spec": model_schema(kind.spec)}
    if kind.status is not None:
        properties["status"] = model_schema(kind.status, defaults=False)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": kind.crd_name},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.singular,
                "shortNames": list(kind.short_names),
                "categories": list(kind.categories),
            },
            "versions": [_version(kind, properties)],
        },
    }


HEADER = "# Generated from gatehouse_operator.api by `make crds`. Do not edit.\n"


def render(kind: Kind) -> str:
    return HEADER + yaml.safe_dump(definition(kind), sort_keys=False, width=100)


def file_name(kind: Kind) -> str:
    return f"{GROUP}_{kind.plural}.yaml"


def output_dirs(root: Path) -> list[Path]:
    # The chart renders its copy as templates (crds.enabled), so that upgrades upgrade them.
    return [root / "crds", root / "charts" / "gatehouse" / "files" / "crds"]


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    for directory in output_dirs(root):
        directory.mkdir(parents=True, exist_ok=True)
        for kind in KINDS:
            (directory / file_name(kind)).write_text(render(kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
