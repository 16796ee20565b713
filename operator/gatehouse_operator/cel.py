"""CEL rules in a CRD schema: the API server checks them on apply, before any webhook or handler
sees the object. The typed models (``api``, ``project_config.schema``) attach them to fields."""

from __future__ import annotations

from pydantic import JsonValue


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, str]:
    """One ``x-kubernetes-validations`` entry: a CEL rule the API server checks on apply."""
    entry = {"rule": rule, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    return entry


def validations(*rules: dict[str, str]) -> dict[str, JsonValue]:
    """The rules as a field's ``json_schema_extra`` (a JSON Schema fragment)."""
    return {"x-kubernetes-validations": [dict[str, JsonValue](rule) for rule in rules]}
