"""The connection's reconcile in named steps: each runs alone (the whole is run end to end in
tests/e2e/test_connections.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.controllers.external_connections import accepted
from gatehouse_operator.runtime import Runtime

RUNTIME = cast(Runtime, SimpleNamespace(settings=SimpleNamespace(allow_http=False)))


def _spec(base_url: str) -> ExternalConnectionSpec:
    return ExternalConnectionSpec.model_validate(
        {
            "displayName": "Example",
            "baseURL": base_url,
            "auth": {"type": "none"},
            "linkPolicy": "AdminsOnly",
        }
    )


def test_accepted_pins_the_canonical_origin() -> None:
    verdicts, origin, token_url = accepted(RUNTIME, _spec("https://API.example.com./"))
    assert (origin, token_url) == ("https://api.example.com", "")
    assert [(v.status, v.reason) for v in verdicts] == [("True", Reason.VALID)]


def test_accepted_refuses_a_plain_http_origin_by_the_installation_s_rule() -> None:
    verdicts, origin, _ = accepted(RUNTIME, _spec("http://api.example.com"))
    assert origin == ""
    assert [(v.status, v.reason) for v in verdicts] == [("False", Reason.INVALID_BASE_URL)]
