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
