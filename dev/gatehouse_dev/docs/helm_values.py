"""The Helm values page: every value in the chart's schema, with its default from values.yaml."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from gatehouse_dev.docs.markdown import cell, code, generated, table

PAGE = "reference/helm-values.md"
_MISSING = object()


def _type(node: dict[str, Any]) -> str:
    kind = node.get("type", "")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array" and isinstance(node.get("items"), dict):
        return f"array of {_type(node['items'])}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type(node['additionalProperties'])}"
    return str(kind)


def _allowed(node: dict[str, Any]) -> str:
    parts = []
    if "enum" in node:
        parts.append(", ".join(code(value) for value in node["enum"]))
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    if low is not None or high is not None:
        opens = "(" if "exclusiveMinimum" in node else ""
        parts.append(f"{opens}{'' if low is None else low}..{'' if high is None else high}")
    if "pattern" in node:
        parts.append(f"pattern {code(node['pattern'])}")
    return "; ".join(parts)


def _default(values: Any, path: list[str]) -> str:
    for name in path:
        if not isinstance(values, dict) or name not in values:
            return ""
        values = values[name]
    # An object's default is its children's; only a leaf (or an empty map) shows one.
    if isinstance(values, dict) and values:
        return ""
    return code(values) if values is not None else "`null`"


def _rows(node: dict[str, Any], path: list[str], values: Any) -> Iterator[list[str]]:
    for name, child in (node.get("properties") or {}).items():
        here = [*path, name]
        yield [
            f"`{'.'.join(here)}`",
            cell(_type(child)),
            _default(values, here),
            _allowed(child),
            cell(child.get("description", "")),
        ]
        yield from _rows(child, here, values)


def render(chart: Path) -> str:
    schema = json.loads((chart / "values.schema.json").read_text())
    values = yaml.safe_load((chart / "values.yaml").read_text())
    return "\n".join(
        [
            generated("charts/gatehouse/values.schema.json and values.yaml"),
            "# Helm values\n",
            "Every value the chart takes (the schema refuses any other), with its default from "
            "`values.yaml`.\n",
            table(
                ["value", "type", "default", "allowed", "description"], _rows(schema, [], values)
            ),
        ]
    )


def pages(root: Path) -> dict[str, str]:
    return {PAGE: render(root / "charts" / "gatehouse")}
