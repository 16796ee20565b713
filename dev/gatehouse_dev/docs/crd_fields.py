"""A page per kind: every field of its spec and status, from the same schema as the CRDs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gatehouse_dev.docs.markdown import cell, code, generated, table
from gatehouse_operator.api import crds
from gatehouse_operator.api.meta import GROUP, VERSION, Kind


def page_name(kind: Kind) -> str:
    return f"reference/{kind.singular}.md"


def _type(node: dict[str, Any]) -> str:
    if "items" in node:
        return f"array of {_type(node['items'])}"
    if isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type(node['additionalProperties'])}"
    if node.get("x-kubernetes-preserve-unknown-fields") and "type" not in node:
        return "any JSON"
    return str(node.get("type", ""))


def _allowed(node: dict[str, Any]) -> str:
    parts = []
    if "enum" in node:
        parts.append(", ".join(code(value) for value in node["enum"]))
    if "minimum" in node or "maximum" in node:
        parts.append(f"{node.get('minimum', '')}..{node.get('maximum', '')}")
    if "minLength" in node or "maxLength" in node:
        parts.append(f"length {node.get('minLength', 0)}..{node.get('maxLength', '')}")
    if "minItems" in node or "maxItems" in node:
        parts.append(f"items {node.get('minItems', 0)}..{node.get('maxItems', '')}")
    if "pattern" in node:
        parts.append(f"pattern {code(node['pattern'])}")
    return "; ".join(parts)


def _fields(node: dict[str, Any], path: str) -> Iterator[list[str]]:
    required = set(node.get("required", ()))
    for name, child in (node.get("properties") or {}).items():
        here = f"{path}.{name}"
        kind = _type(child) + (", required" if name in required else "")
        yield [
            f"`{here}`",
            cell(kind),
            code(child.get("default")),
            _allowed(child),
            cell(child.get("description", "")),
        ]
        yield from _children(child, here)


def _children(node: dict[str, Any], path: str) -> Iterator[list[str]]:
    if "properties" in node:
        yield from _fields(node, path)
    elif isinstance(node.get("items"), dict):
        yield from _children(node["items"], f"{path}[]")
    elif isinstance(node.get("additionalProperties"), dict):
        yield from _children(node["additionalProperties"], f"{path}.<key>")


def render(kind: Kind) -> str:
    headers = ["field", "type", "default", "allowed", "description"]
    lines = [
        generated("gatehouse_operator.api (the models the CRDs are generated from)"),
        f"# {kind.kind}\n",
        f"`{GROUP}/{VERSION}`, kind `{kind.kind}` (plural `{kind.plural}`"
        + "".join(f", short `{short}`" for short in kind.short_names)
        + f"). {cell(kind.description)}\n",
        "## spec\n",
        table(headers, _fields(crds.model_schema(kind.spec), "spec")),
    ]
    if kind.status is not None:
        lines += [
            "## status\n",
            "Written by the operator; never set it.\n",
            table(headers, _fields(crds.model_schema(kind.status, defaults=False), "status")),
        ]
    return "\n".join(lines)


def pages() -> dict[str, str]:
    return {page_name(kind): render(kind) for kind in crds.KINDS}
