"""The app-build hand-off and the connection's answers: what they say of a connection's headers,
content types and link warning (tests/e2e/test_access.py runs them through the service API)."""

from __future__ import annotations

from typing import Any

from gatehouse_operator.api.stored import StoredApp, StoredConnection
from gatehouse_operator.connections.actions import linkable
from gatehouse_operator.connections.handoff import build_spec
from gatehouse_operator.connections.models import HiddenLink, LinkedConnectionSpec

CRM: dict[str, Any] = {
    "metadata": {"name": "crm"},
    "spec": {
        "displayName": "CRM",
        "baseURL": "https://api.crm.example",
        "allowedMethods": ["GET", "POST"],
        "headers": [{"name": "Notion-Version", "value": "2022-06-28"}],
        "allowedContentTypes": ["application/json"],
        "auth": {"type": "bearer", "secretRef": {"name": "crm", "key": "token"}},
        "linkPolicy": "AdminsOnly",
    },
    "status": {"origin": "https://api.crm.example"},
}
APP: dict[str, Any] = {
    "metadata": {"name": "sales"},
    "spec": {"connections": [{"alias": "crm", "connection": "crm"}]},
}


def test_the_hand_off_names_the_headers_sent_and_the_content_types_allowed() -> None:
    [linked] = build_spec(
        "DataApp", StoredApp.of(APP), {"crm": StoredConnection.of(CRM)}, {}
    ).connections
    assert isinstance(linked, LinkedConnectionSpec)
    dumped = linked.model_dump(by_alias=True, mode="json")
    assert dumped["headers"] == [{"name": "Notion-Version", "value": "2022-06-28"}]
    assert dumped["allowedContentTypes"] == ["application/json"]


def test_a_link_the_caller_may_not_see_names_neither() -> None:
    [hidden] = build_spec("DataApp", StoredApp.of(APP), {}, {}).connections
    assert isinstance(hidden, HiddenLink)
    dumped = hidden.model_dump(by_alias=True, mode="json")
    assert "headers" not in dumped
    assert "allowedContentTypes" not in dumped
    assert "Notion-Version" not in str(dumped)


def test_a_listed_connection_carries_its_link_warning() -> None:
    item = linkable(StoredConnection.of(CRM), {})
    assert item.link_warning.startswith(
        "Apps linked to this connection can send any data they can query to "
        "https://api.crm.example. It allows POST:"
    )
