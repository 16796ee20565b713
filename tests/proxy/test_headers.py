"""Header policy in both directions, including what the Connection header names."""

from __future__ import annotations

from gatehouse_proxy.headers import app_response_headers, upstream_request_headers


def test_request_headers_drop_identity_routing_and_hop_by_hop() -> None:
    kept = upstream_request_headers(
        [
            ("Accept", "application/json"),
            ("Authorization", "Bearer app-token"),
            ("Cookie", "s=1"),
            ("X-Forwarded-For", "1.2.3.4"),
            ("Connection", "close, X-Custom-Hop"),
            ("X-Custom-Hop", "drop me"),
            ("X-Api-Key", "forged"),
            ("X-Trace", "keep"),
        ],
        injected={"x-api-key"},
    )
    assert kept == [("Accept", "application/json"), ("X-Trace", "keep")]


def test_underscore_spellings_of_dropped_and_injected_names_are_dropped() -> None:
    kept = upstream_request_headers(
        [
            ("X_Api_Key", "forged"),
            ("x_api-KEY", "forged"),
            ("X_Forwarded_For", "1.2.3.4"),
            ("Proxy_Authorization", "Basic eA=="),
            ("Connection", "X_Custom_Hop"),
            ("X-Custom-Hop", "drop me"),
            ("X_Trace_Id", "keep"),
        ],
        injected={"X-Api-Key"},
    )
    assert kept == [("X_Trace_Id", "keep")]


OVERRIDES = [
    "X-Host",
    "X-Original-Host",
    "X-HTTP-Host-Override",
    "X-Original-URI",
    "X-Envoy-Original-Path",
    "X-Method",
    "True-Client-IP",
    "X-Client-IP",
    "CF-Connecting-IP",
    "Client-IP",
    "Via",
]


def test_host_url_method_and_client_address_overrides_are_dropped() -> None:
    kept = upstream_request_headers([(name, "x") for name in OVERRIDES], injected=set())
    assert kept == []


def test_range_is_dropped_only_on_credentialed_connections() -> None:
    ranged = [("Range", "bytes=0-3"), ("If-Range", '"v1"')]
    assert upstream_request_headers(ranged, injected=set()) == ranged
    assert upstream_request_headers(ranged, injected={"x-api-key"}, credentialed=True) == []


def test_response_headers_are_allowlisted_and_scrubbed_of_injected_values() -> None:
    kept = dict(
        app_response_headers(
            [
                ("Set-Cookie", "session=1"),
                ("Server", "internal/1.2"),
                ("Content-Type", "application/json"),
                ("Link", '<https://api.example.com/v1?page=2&key=sk%2Flive%201>; rel="next"'),
                ("Content-Location", "/v1?key=sk/live+1"),
                ("X-RateLimit-Remaining", "5"),
            ],
            secrets=["sk/live 1"],
        )
    )
    assert kept == {
        "content-type": "application/json",
        "link": '<https://api.example.com/v1?page=2&key=[redacted]>; rel="next"',
        "content-location": "/v1?key=[redacted]",
        "x-ratelimit-remaining": "5",
    }
