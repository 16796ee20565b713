"""The operator's auth kinds (api.auth_kinds): one row per type the table may carry, and each
row's facts true of the model it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast, get_args

import pytest

from gatehouse_contract.routes import AuthType
from gatehouse_operator import web
from gatehouse_operator.api.auth_kinds import AUTH_KINDS, ENDPOINT_FIELDS, FORM_SECTIONS, AuthKind
from gatehouse_operator.api.connection import Auth


def test_every_auth_type_has_one_row() -> None:
    assert sorted(AUTH_KINDS) == sorted(get_args(AuthType))
    assert all(kind.type == auth_type for auth_type, kind in AUTH_KINDS.items())


def test_every_section_of_auth_is_one_kind_s() -> None:
    """A section on Auth (between type and the secret's place) is a kind's, under its key."""
    keys = [str(field.alias) for field in Auth.model_fields.values()]
    sections = keys[keys.index("type") + 1 : keys.index("secretRef")]
    assert sorted(sections) == sorted(kind.section for kind in AUTH_KINDS.values() if kind.section)


def _section_model(kind: AuthKind) -> type[Any]:
    attribute = next(name for name, f in Auth.model_fields.items() if f.alias == kind.section)
    model, _ = get_args(Auth.model_fields[attribute].annotation)  # the model | None
    return cast("type[Any]", model)


@pytest.mark.parametrize("kind", [k for k in AUTH_KINDS.values() if k.section], ids=str)
def test_a_section_places_the_credential(kind: AuthKind) -> None:
    assert callable(getattr(_section_model(kind), "placed", None)), kind.section


@pytest.mark.parametrize("kind", [k for k in AUTH_KINDS.values() if k.token_endpoint], ids=str)
def test_a_token_endpoint_section_names_its_endpoint_and_client(kind: AuthKind) -> None:
    fields = _section_model(kind).model_fields
    assert {fields["token_url"].alias, fields["client_id"].alias} == set(ENDPOINT_FIELDS)


def test_each_form_section_is_one_partial_of_the_wizard() -> None:
    """Adding a kind's fields to the page is adding its partial (and its row in FORM_SECTIONS);
    no partial is left out of the page."""
    partials = Path(web.__file__).parent / "templates" / "auth"
    assert sorted(path.stem for path in partials.glob("*.html")) == sorted(FORM_SECTIONS)
    assert set(FORM_SECTIONS) <= set(AUTH_KINDS)


def test_every_kind_that_takes_a_secret_says_what_it_is() -> None:
    """The page's Secret field and the service API name each kind's secret from its row."""
    for kind in AUTH_KINDS.values():
        assert bool(kind.named and kind.named_in_api) == (kind.shape != "none"), kind.type
        assert bool(kind.described) == bool(kind.section), kind.type
