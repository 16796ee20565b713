"""Linking from the connection's side: the alias made from its name, retries, taken aliases."""

from __future__ import annotations

from typing import Any

import pytest

from gatehouse_operator.api.stored import StoredApp
from gatehouse_operator.connections.errors import Refused
from gatehouse_operator.connections.linking import alias_for, link_change, linked_by


def test_the_alias_is_the_connections_name_unique_within_the_app() -> None:
    assert alias_for("payments-api", []) == "payments-api"
    taken = [
        {"alias": "payments-api", "connection": "other"},
        {"alias": "payments-api-2", "connection": "third"},
    ]
    assert alias_for("payments-api", taken) == "payments-api-3"
    assert alias_for("api.example.com", []) == "api-example-com"  # a DNS subdomain name
    long = "a" * 253
    assert alias_for(long, [{"alias": "a" * 64, "connection": "x"}]) == "a" * 62 + "-2"


def test_a_retry_changes_nothing_and_a_taken_alias_is_refused() -> None:
    first = link_change([], "payments", "", "DataApp board")
    assert first.alias == "payments"
    assert first.links == [{"alias": "payments", "connection": "payments"}]
    assert first.links is not None
    # Again, with or without the alias: the link is there, nothing changes.
    assert link_change(first.links, "payments", "", "DataApp board").links is None
    assert link_change(first.links, "payments", "payments", "DataApp board").links is None
    with pytest.raises(Refused) as refused:
        link_change(first.links, "crm", "payments", "DataApp board")
    assert refused.value.status == 409
    assert refused.value.message.startswith(
        "alias: 'payments' is held by connection 'payments' in DataApp board"
    )
    # Made from the name, the alias steps past one another connection holds.
    held = [{"alias": "crm", "connection": "old-crm"}]
    assert link_change(held, "crm", "", "DataApp board").alias == "crm-2"


def test_linked_by_lists_the_linking_apps_then_those_the_visitor_may_link() -> None:
    apps: list[dict[str, Any]] = [
        {
            "metadata": {"name": "zeta"},
            "spec": {"connections": [{"alias": "p", "connection": "pay"}]},
        },
        {"metadata": {"name": "alpha"}, "spec": {}},
        {"metadata": {"name": "hidden"}, "spec": {}},
    ]
    shown = linked_by("pay", map(StoredApp.of, apps), {"alpha", "zeta"})
    assert [(app.name, app.alias) for app in shown] == [("zeta", "p"), ("alpha", "")]
