"""Generates the CustomResourceDefinitions from the typed models: the models are the one source.

Kubernetes wants *structural* schemas: every node typed, no ``$ref``, no ``anyOf`` with null, no
``additionalProperties: false``. Pydantic's JSON Schema has all three, so it is rewritten here.
``python -m gatehouse_operator.api.crds`` writes ``crds/`` and the chart's copy; a test fails when
the files differ from what the models generate.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.connection_sample import CONNECTION_SAMPLE
from gatehouse_operator.api.connection_test import CONNECTION_TEST
from gatehouse_operator.api.meta import GROUP, VERSION, Kind
from gatehouse_operator.api.project_config import PROJECT_CONFIG

KINDS = (
    EXTERNAL_CONNECTION,
    DATA_APP,
    CHART_TYPE,
    CONNECTION_TEST,
    CONNECTION_SAMPLE,
    PROJECT_CONFIG,
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


class SchemaError(ValueError):
    """A model uses a construct a structural schema cannot express."""


def structural(
    node: dict[str, Any], defs: dict[str, Any], *, defaults: bool = True
) -> dict[str, Any]:
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        return structural({**target, **siblings}, defs, defaults=defaults)
    if "anyOf" in node:
        options = [option for option in node["anyOf"] if option.get("type") != "null"]
        if len(options) != 1:
            raise SchemaError(f"unions are not structural: {node['anyOf']}")
        siblings = {key: value for key, value in node.items() if key != "anyOf"}
        return structural({**options[0], **siblings}, defs, defaults=defaults)

    out: dict[str, Any] = {}
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
            name: structural(child, defs, defaults=defaults)
            for name, child in node["properties"].items()
        }
    if "items" in node:
        out["items"] = structural(node["items"], defs, defaults=defaults)
    extra = node.get("additionalProperties")
    # A map with a key pattern: the values' schema is kept, the pattern is left to a CEL rule
    # (structural schemas have no patternProperties).
    patterned = list((node.get("patternProperties") or {}).values())
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


def model_schema(model: type[BaseModel], *, defaults: bool = True) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return structural(raw, raw.get("$defs", {}), defaults=defaults)


# What every Kubernetes object's first fields mean, worded as the API conventions do.
_CONVENTIONS = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
_OBJECT_FIELDS: dict[str, Any] = {
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


def definition(kind: Kind) -> dict[str, Any]:
    properties: dict[str, Any] = {**_OBJECT_FIELDS, "spec": model_schema(kind.spec)}
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
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    **({"subresources": {"status": {}}} if kind.status is not None else {}),
                    "additionalPrinterColumns": [
                        {
                            "name": column.name,
                            "type": column.type,
                            "jsonPath": column.json_path,
                            **({"description": column.description} if column.description else {}),
                            **({"priority": column.priority} if column.priority else {}),
                        }
                        for column in kind.columns
                    ]
                    + [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": kind.description,
                            "required": ["spec"],
                            "properties": properties,
                        }
                    },
                }
            ],
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
