"""Bounds on what one connection, one app and one namespace may take of the routing table.

The refusal itself (condition, Event, the route left out) runs against the real API server in
tests/e2e/test_table_delivery.py; here: which field is named, and the namespace's running total.
"""

from __future__ import annotations

from gatehouse_contract.keyring import Encrypted
from gatehouse_contract.routes import AppRoute, ConnectionRoute, Credential, Limits, UpstreamTls
from gatehouse_operator.api.conditions import ConditionType
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.table import budget
from gatehouse_operator.table.store import RouteStore

LIMITS = Limits(
    timeout_seconds=30, max_request_bytes=1, max_response_bytes=1, requests_per_minute=1
)


def connection(name: str, paths: int = 1, secret_bytes: int = 0) -> ConnectionRoute:
    encrypted = (
        Encrypted(key_id="k1", nonce="n", ciphertext="c" * secret_bytes) if secret_bytes else None
    )
    return ConnectionRoute(
        key=f"shop/{name}",
        uid=name,
        origin="https://api.example.com",
        allowed_methods=frozenset({"GET"}),
        allowed_paths=tuple(f"/v1/{index:04d}/" + "p" * 1000 for index in range(paths)),
        credential=Credential(type="bearer", encrypted=encrypted),
        limits=LIMITS,
    )


# A connection without a Secret: what the store's indexes read of one.
SPEC = ExternalConnectionSpec.model_validate(
    {
        "displayName": "Example",
        "baseURL": "https://api.example.com",
        "auth": {"type": "none"},
        "linkPolicy": "AdminsOnly",
    }
)


def body(name: str) -> Resource:
    return resource_of({"metadata": {"namespace": "shop", "name": name, "uid": name}, "spec": {}})


def refusal(route: ConnectionRoute, total: int = 0) -> str:
    size = budget.entry_size(route)
    verdict = budget.check(route, size, total or size, ConditionType.ACCEPTED)
    assert verdict is not None
    assert verdict.type == "Accepted"
    return f"{verdict.reason}: {verdict.message}"


def test_a_connection_over_its_bound_names_the_field_that_makes_it() -> None:
    assert budget.check(connection("ok"), 1000, 1000, ConditionType.ACCEPTED) is None
    assert "TableEntryTooLarge" in refusal(connection("paths", paths=40))
    assert "spec.allowedPaths makes" in refusal(connection("paths", paths=40))
    assert "the Secret's value (spec.auth.secretRef) makes" in refusal(
        connection("secret", secret_bytes=300_000)
    )


def test_a_namespace_over_its_bound_is_refused_naming_its_total() -> None:
    route = connection("one-more")
    message = refusal(route, total=budget.MAX_NAMESPACE_BYTES + 1)
    assert message.startswith("NamespaceTableFull: the namespace's connections and apps")
    app = AppRoute(key="shop/DataApp/a", token_sha256="t", links={"x" * 64: "shop/c" * 40})
    verdict = budget.check(app, 40_000, 40_000, ConditionType.READY)
    assert verdict is not None
    assert "spec.connections makes" in verdict.message


def test_the_world_keeps_each_namespaces_total() -> None:
    routes = RouteStore()
    first, second = connection("a"), connection("b", paths=3)
    routes.put_connection(first, SPEC, body("a"))
    routes.put_connection(second, SPEC, body("b"))
    both = budget.entry_size(first) + budget.entry_size(second)
    assert routes.budget.total_with("connection", "other/x", 0) == 0
    assert routes.budget.total_with("connection", "shop/new", 0) == both
    # Replacing a route counts its new size instead of its old one.
    assert (
        routes.budget.total_with("connection", "shop/a", 10)
        == both - len(first.model_dump_json()) + 10
    )
    routes.drop_connection("shop/b")
    assert routes.budget.total_with("connection", "shop/new", 0) == budget.entry_size(first)


def test_a_connections_own_tls_is_bounded_by_its_own_rules_and_counted_to_its_namespace() -> None:
    """A CA bundle (up to 64 KiB, as the CRD takes) and a client certificate's chain and key
    would not fit beside the rest of an entry's 32 KiB: they are bounded by their own rules, and
    the namespace's bound counts them. A route over its bound by the rest names the rest."""
    certificate = Encrypted(key_id="k1", nonce="n", ciphertext="c" * 60_000)
    tls = UpstreamTls(
        ca_bundle="-----BEGIN CERTIFICATE-----\n" + "A" * 60_000, client_certificate=certificate
    )
    both = connection("both").model_copy(update={"tls": tls})
    size = budget.entry_size(both)
    assert size > budget.MAX_CONNECTION_BYTES
    assert budget.check(both, size, size, ConditionType.ACCEPTED) is None
    crowded = connection("crowded", paths=40).model_copy(update={"tls": tls})
    said = refusal(crowded)
    assert "(its spec.tls aside)" in said
    assert "spec.allowedPaths makes" in said
