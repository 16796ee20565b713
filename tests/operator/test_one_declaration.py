"""One declaration per API field: the stored (lenient) and document (the wizard's) shapes of a
resource are held to its strict model, field by field: the same names and aliases, the same
defaults, values of the same JSON kind. A field added, renamed or given another default in one
shape and not in the strict model fails here, naming the field.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest
from pydantic import BaseModel, Field, JsonValue, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from gatehouse_operator.api import apps, connection, connection_document, connection_test, stored
from gatehouse_operator.api.meta import Condition, Status
from gatehouse_operator.web.field_problems import annotated_type

# Each stored shape and the strict model it reads leniently. Complete: every field of the strict
# model is read (an edit starts from the stored spec, so a field missing there would be lost).
STORED: tuple[tuple[type[BaseModel], type[BaseModel], bool], ...] = (
    (stored.StoredConnectionSpec, connection.ExternalConnectionSpec, True),
    (stored.StoredHeader, connection.HeaderSetting, True),
    (stored.StoredAuth, connection.Auth, True),
    (stored.StoredApiKey, connection.ApiKeyAuth, True),
    (stored.StoredGoogleServiceAccount, connection.GoogleServiceAccountAuth, True),
    (stored.StoredOAuth2, connection.OAuth2ClientCredentialsAuth, True),
    (stored.StoredOAuth2Code, connection.OAuth2AuthorizationCodeAuth, True),
    (stored.StoredAwsSigV4, connection.AwsSigV4Auth, True),
    (stored.StoredSecretRef, connection.SecretKeyRef, True),
    (stored.StoredCondition, Condition, False),
    (stored.StoredStatus, Status, False),
    (stored.StoredConnectionStatus, connection.ExternalConnectionStatus, False),
    (stored.StoredConnectionTestSpec, connection_test.ConnectionTestSpec, False),
    (stored.StoredConnectionTestStatus, connection_test.ConnectionTestStatus, False),
    (stored.StoredLink, apps.Link, True),
    (stored.StoredAppSpec, apps.LinkedAppSpec, False),
)
# The wizard's document of a spec, and the strict model the API server holds it to: every field.
DOCUMENTS: tuple[tuple[type, type[BaseModel]], ...] = (
    (connection_document.ConnectionSpecDocument, connection.ExternalConnectionSpec),
    (connection_document.HeaderDocument, connection.HeaderSetting),
    (connection_document.AuthDocument, connection.Auth),
    (connection_document.ApiKeyDocument, connection.ApiKeyAuth),
    (connection_document.GoogleServiceAccountDocument, connection.GoogleServiceAccountAuth),
    (connection_document.OAuth2Document, connection.OAuth2ClientCredentialsAuth),
    (connection_document.OAuth2CodeDocument, connection.OAuth2AuthorizationCodeAuth),
    (connection_document.AwsSigV4Document, connection.AwsSigV4Auth),
    (connection_document.SecretRefDocument, connection.SecretKeyRef),
)


def _unwrapped(annotation: Any) -> Any:
    """The type under Annotated and an optional None."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            others = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(others) != 1:
                return annotation
            annotation = others[0]
        else:
            return annotation


def _kind(annotation: Any) -> str:
    """The JSON kind a value of the type is: what both shapes must agree on."""
    annotation = _unwrapped(annotation)
    origin = get_origin(annotation)
    if annotation in (Any, JsonValue):
        return "any"
    if origin is Literal:
        return _kind(type(get_args(annotation)[0]))
    if origin is list:
        return "array of " + _kind(get_args(annotation)[0])
    if origin is dict or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return "object"
    if isinstance(annotation, type) and hasattr(annotation, "__required_keys__"):
        return "object"  # a TypedDict
    return {str: "string", bool: "boolean", int: "integer"}.get(annotation, repr(annotation))


def _agree(lenient: Any, strict: Any) -> bool:
    """Whether a lenient shape's type can hold what the strict one holds: the same JSON kind,
    or any JSON where the strict one is any JSON or an object read as a mapping."""
    mine, theirs = _kind(lenient), _kind(strict)
    return mine == theirs or "any" in (mine, theirs)


def _strict_default(field: FieldInfo) -> object:
    """The default as the API server fills it in: the schema's own where the model gives one
    (an object's empty default, each of its fields defaulted by the API server), else the
    model's, as JSON."""
    extra = field.json_schema_extra
    if isinstance(extra, dict) and "default" in extra:
        return extra["default"]
    value = field.get_default(call_default_factory=True)
    return TypeAdapter(annotated_type(field)).dump_python(value, mode="json", by_alias=True)


def _empty(value: object) -> bool:
    """An unset value of a lenient shape: nothing read, or a nested part with nothing set."""
    if isinstance(value, BaseModel):
        return not value.model_fields_set
    return value in ("", [], {}, None, False, 0)


def _admitted(field: FieldInfo, value: object) -> bool:
    try:
        TypeAdapter(annotated_type(field)).validate_python(value)
    except ValidationError:
        return False
    return True


def _by_alias(model: type[BaseModel]) -> dict[str, tuple[str, FieldInfo]]:
    return {(field.alias or name): (name, field) for name, field in model.model_fields.items()}


def stored_drift(lenient: type[BaseModel], strict: type[BaseModel], complete: bool) -> list[str]:
    """How the stored shape differs from the strict model, a line per field."""
    found = []
    theirs = _by_alias(strict)
    for alias, (name, field) in _by_alias(lenient).items():
        where = f"{lenient.__name__}.{name}"
        if alias not in theirs:
            found.append(f"{where}: {alias} is no field of {strict.__name__}")
            continue
        their_name, their = theirs[alias]
        if their_name != name:
            found.append(f"{where}: named {their_name} in {strict.__name__}")
        if not _agree(field.annotation, their.annotation):
            found.append(
                f"{where}: {_kind(field.annotation)}, {_kind(their.annotation)} in "
                f"{strict.__name__}"
            )
        if field.is_required():
            if not their.is_required():
                found.append(f"{where}: required, {strict.__name__} has a default")
            continue
        default = field.get_default(call_default_factory=True)
        if their.is_required():
            # Unset in a stored object the schema let through only in another version: read as
            # empty, or as a value the strict model takes.
            if not (_empty(default) or _admitted(their, default)):
                found.append(f"{where}: defaults to {default!r}, which {strict.__name__} refuses")
            continue
        wanted = _strict_default(their)
        if wanted is None or isinstance(default, BaseModel):
            # Unset in the strict model: read as empty (a nested part with nothing set).
            same = _empty(default) and wanted in (None, {})
        else:
            same = TypeAdapter(annotated_type(field)).dump_python(default, mode="json") == wanted
        if not same:
            found.append(f"{where}: defaults to {default!r}, {strict.__name__} to {wanted!r}")
    if complete:
        missing = set(theirs) - set(_by_alias(lenient))
        found += [f"{lenient.__name__}: no field {alias}" for alias in sorted(missing)]
    return found


def document_drift(document: type, strict: type[BaseModel]) -> list[str]:
    """How the document differs from the strict model, a line per key."""
    found = []
    keys = get_type_hints(document)
    theirs = _by_alias(strict)
    for key, annotation in keys.items():
        if key not in theirs:
            found.append(f"{document.__name__}.{key}: no field of {strict.__name__}")
        elif not _agree(annotation, theirs[key][1].annotation):
            found.append(
                f"{document.__name__}.{key}: {_kind(annotation)}, "
                f"{_kind(theirs[key][1].annotation)} in {strict.__name__}"
            )
    found += [f"{document.__name__}: no key {alias}" for alias in sorted(set(theirs) - set(keys))]
    required: frozenset[str] = getattr(document, "__required_keys__", frozenset())
    for alias, (_, field) in theirs.items():
        if field.is_required() and alias in keys and alias not in required:
            found.append(f"{document.__name__}.{alias}: optional, required by {strict.__name__}")
    return found


@pytest.mark.parametrize(
    ("lenient", "strict", "complete"), STORED, ids=[pair[0].__name__ for pair in STORED]
)
def test_each_stored_shape_is_its_strict_models(
    lenient: type[BaseModel], strict: type[BaseModel], complete: bool
) -> None:
    assert stored_drift(lenient, strict, complete) == []


@pytest.mark.parametrize(("document", "strict"), DOCUMENTS, ids=[d.__name__ for d, _ in DOCUMENTS])
def test_the_wizards_document_is_the_strict_spec(document: type, strict: type[BaseModel]) -> None:
    assert document_drift(document, strict) == []


def test_every_stored_and_document_shape_is_held() -> None:
    """A shape added to stored.py or connection_document.py is held here too."""
    held = {lenient for lenient, _, _ in STORED}
    shapes = {
        value
        for value in vars(stored).values()
        if isinstance(value, type)
        and issubclass(value, stored.Stored)
        and value.__module__ == stored.__name__
    }
    # Whole objects (metadata and spec together) and the reads of other kinds' configuration.
    wrappers = {
        stored.Stored,
        stored.StoredConnection,
        stored.StoredConnectionTest,
        stored.StoredApp,
        stored.StoredProjectConfig,
        stored.StoredProjectConfigSpec,
    }
    assert shapes - wrappers == held
    documents = {
        value
        for value in vars(connection_document).values()
        if isinstance(value, type) and hasattr(value, "__required_keys__")
    }
    # The optional halves of three documents, held as part of the whole.
    halves = {
        connection_document.ConnectionSpecOptions,
        connection_document.OAuth2Options,
        connection_document.OAuth2CodeOptions,
    }
    assert documents - halves == {document for document, _ in DOCUMENTS}


def test_a_drift_is_named() -> None:
    """The checks find what they are for: another alias, another default, a field left out."""

    class Misspelt(stored.Stored):
        token_url: str = ""  # read as tokenUrl, not tokenURL
        client_authentication: str = "body"
        parameters: list[str] = Field(default_factory=list)

    drift = stored_drift(Misspelt, connection.OAuth2ClientCredentialsAuth, True)
    assert "Misspelt.token_url: tokenUrl is no field of OAuth2ClientCredentialsAuth" in drift
    assert (
        "Misspelt.client_authentication: defaults to 'body', OAuth2ClientCredentialsAuth to 'basic'"
    ) in drift
    assert "Misspelt.parameters: array of string, object in OAuth2ClientCredentialsAuth" in drift
    assert "Misspelt: no field clientId" in drift
