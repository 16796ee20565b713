"""Every chart value is typed in values.schema.json and listed in charts/gatehouse/README.md,
and the schema knows no value that values.yaml lacks.

A closed object marked ``x-one-value`` (a securityContext, a probe's timing) is one value: its
fields are checked (a misspelt one fails), and values.yaml sets only some of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "gatehouse"


def _descended(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties") is False and not schema.get("x-one-value")


def schema_leaves(schema: dict[str, Any], path: str = "") -> set[str]:
    properties = schema.get("properties")
    if properties is None or not _descended(schema):
        return {path}
    leaves: set[str] = set()
    for name, child in properties.items():
        leaves |= schema_leaves(child, f"{path}.{name}" if path else name)
    return leaves


def value_leaves(values: dict[str, Any], schema: dict[str, Any], path: str = "") -> set[str]:
    """Paths in values.yaml, down to where the schema stops (free-form maps are one value)."""
    leaves: set[str] = set()
    for name, value in values.items():
        child = schema.get("properties", {}).get(name, {})
        where = f"{path}.{name}" if path else name
        if isinstance(value, dict) and _descended(child):
            leaves |= value_leaves(value, child, where)
        else:
            leaves.add(where)
    return leaves


def test_every_value_is_typed_and_documented() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    typed = schema_leaves(schema)
    assert value_leaves(values, schema) == typed
    readme = (CHART / "README.md").read_text()
    undocumented = sorted(path for path in typed if f"| `{path}` |" not in readme)
    assert not undocumented, f"values missing from charts/gatehouse/README.md: {undocumented}"
