"""The CRD files are generated from the models: any drift fails here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gatehouse_operator.api import crds
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.meta import Kind

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", crds.KINDS, ids=lambda kind: kind.kind)
@pytest.mark.parametrize(
    "directory", crds.output_dirs(ROOT), ids=lambda d: str(d.relative_to(ROOT))
)
def test_committed_crd_matches_the_model(kind: Kind, directory: Path) -> None:
    committed = (directory / crds.file_name(kind)).read_text()
    assert committed == crds.render(kind), (
        f"{directory / crds.file_name(kind)} is stale: run `make crds` and commit the result"
    )


def _walk(node: Any, path: str = "") -> list[str]:
    """Every place a structural schema forbids: $ref, anyOf, additionalProperties false, untyped."""
    problems: list[str] = []
    if isinstance(node, dict):
        if "$ref" in node or "anyOf" in node or node.get("additionalProperties") is False:
            problems.append(path)
        if "properties" in node and node.get("type") != "object":
            problems.append(path)
        for key, child in node.items():
            problems += _walk(child, f"{path}.{key}")
    return problems


@pytest.mark.parametrize("kind", crds.KINDS, ids=lambda kind: kind.kind)
def test_schemas_are_structural(kind: Kind) -> None:
    schema = crds.definition(kind)["spec"]["versions"][0]["schema"]
    assert _walk(schema) == []


def test_status_schema_carries_no_defaults() -> None:
    assert EXTERNAL_CONNECTION.status is not None
    status = crds.model_schema(EXTERNAL_CONNECTION.status, defaults=False)
    assert "default" not in str(status)


def _undescribed(node: dict[str, Any], path: str) -> list[str]:
    """Every field under ``node`` that ``kubectl explain`` would show as <no description>."""
    missing: list[str] = []
    for name, child in (node.get("properties") or {}).items():
        # ObjectMeta is described by the API server itself, which refuses more than its type.
        if not path.count(".") and name == "metadata":
            continue
        if not child.get("description"):
            missing.append(f"{path}.{name}")
        missing += _undescribed(child, f"{path}.{name}")
    for nested, suffix in ((node.get("items"), "[]"), (node.get("additionalProperties"), ".*")):
        if isinstance(nested, dict):
            missing += _undescribed(nested, path + suffix)
    return missing


@pytest.mark.parametrize("kind", crds.KINDS, ids=lambda kind: kind.kind)
def test_every_field_has_a_description(kind: Kind) -> None:
    """``kubectl explain`` is where a platform team reads the API: no field is left blank."""
    schema = crds.definition(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _undescribed(schema, kind.kind.lower()) == []
