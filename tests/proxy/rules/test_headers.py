"""Header policy in both directions, including what the Connection header names."""

from __future__ import annotations

import pytest

from gatehouse_contract.redaction import Redactor
from gatehouse_proxy.http.media_types import extract, parse
from gatehouse_proxy.rules.headers import app_response_headers, upstream_request_headers


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


# Every token character other than a letter, a digit, "-" and "_" (above): CGI-style servers read
# each as "_" (Apache's mod_cgi before 2.4; PHP's $_SERVER for "."), so each spelling is one
# variable.
PUNCTUATION = ".~!#$%&'*+^`|"


@pytest.mark.parametrize("mark", PUNCTUATION)
def test_punctuated_spellings_of_dropped_and_injected_names_are_dropped(mark: str) -> None:
    def spelled(name: str) -> str:
        return name.replace("-", mark)

    kept = upstream_request_headers(
        [
            (spelled("X-Api-Key"), "forged"),
            (spelled("X-Forwarded-Host"), "evil.example"),
            (spelled("X-Original-URL"), "/admin"),
            (spelled("Content-Length"), "0"),
            (spelled("Transfer-Encoding"), "chunked"),
            (spelled("Proxy-Authorization"), "Basic eA=="),
            (spelled("X-Gatehouse-Caller"), "me"),
            ("Connection", spelled("X-Custom-Hop")),
            ("X-Custom-Hop", "drop me"),
            (spelled("X-Trace-Id"), "keep"),
        ],
        injected={"X-Api-Key"},
    )
    assert kept == [(spelled("X-Trace-Id"), "keep")]


@pytest.mark.parametrize(
    "name",
    [
        # httpoxy: CGI servers hand "Proxy" to the app as HTTP_PROXY, which HTTP clients read as
        # their proxy.
        "Proxy",
        "proxy",
        # gunicorn takes a SCRIPT_NAME header as WSGI's SCRIPT_NAME (the mount point).
        "Script-Name",
        "Script_Name",
        "SCRIPT.NAME",
    ],
)
def test_names_cgi_servers_map_onto_their_own_variables_are_dropped(name: str) -> None:
    assert upstream_request_headers([(name, "x")], set()) == []


# Headers that carry a host, URL, scheme, port, method or client address some framework or proxy
# honours, by where they are read.
ROUTING = {
    "RFC 7239, Symfony, Laravel, Rails, Django, Spring, Express": [
        "Forwarded",
        "X-Forwarded-For",
        "X-Forwarded-Host",
        "X-Forwarded-Port",
        "X-Forwarded-Proto",
        "X-Forwarded-Prefix",
        "X-Forwarded-Ssl",
        "X-Forwarded-Aws-Elb",
    ],
    "ASP.NET Core forwarded headers": [
        "X-Original-For",
        "X-Original-Host",
        "X-Original-Proto",
        "X-Original-Prefix",
    ],
    "IIS, Azure App Service": [
        "X-Original-URL",
        "X-Rewrite-URL",
        "X-WAWS-Unencoded-URL",
        "Disguised-Host",
        "WAS-Default-Hostname",
        "X-MS-Original-URL",
        "X-AppService-Proto",
        "X-ARR-SSL",
        "X-Client-IP",
        "X-Client-Port",
        "Client-IP",
    ],
    "Azure Front Door and Application Gateway": [
        "X-Azure-FDID",
        "X-Azure-ClientIP",
        "X-Azure-SocketIP",
        "X-Azure-Ref",
        "X-Azure-RequestChain",
        "X-FD-HealthProbe",
    ],
    "nginx, ingress-nginx, oauth2-proxy": [
        "X-Real-IP",
        "X-Original-URI",
        "X-Original-Method",
        "X-Original-Forwarded-For",
        "X-Scheme",
        "X-Auth-Request-Redirect",
    ],
    "Traefik": ["X-Forwarded-Uri", "X-Forwarded-Server", "X-Forwarded-Method"],
    "Envoy": ["X-Envoy-Original-Path", "X-Envoy-External-Address"],
    "AWS CloudFront, Akamai, Fastly, Cloudflare": [
        "CloudFront-Viewer-Address",
        "CloudFront-Forwarded-Proto",
        "True-Client-IP",
        "Fastly-Client-IP",
        "CF-Connecting-IP",
        "CF-Visitor",
        "CF-Worker",
    ],
    "Rack, WSGI and PHP scheme and mount point": [
        "X-Url-Scheme",
        "X-Forwarded-Scheme",
        "X-Forwarded-Protocol",
        "Front-End-Https",
        "X-Script-Name",
        "X-Sendfile-Type",
        "X-Accel-Mapping",
    ],
    "Java servlet containers": ["WL-Proxy-Client-IP", "X-Cluster-Client-IP"],
    "host and method overrides": [
        "Host",
        "X-Host",
        "X-HTTP-Host-Override",
        "X-HTTP-Method-Override",
        "X-HTTP-Method",
        "X-Method-Override",
        "X-Method",
    ],
    "WebDAV": ["Destination", "If"],
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, id=f"{source}: {name}")
        for source, names in ROUTING.items()
        for name in names
    ],
)
def test_headers_carrying_a_host_url_or_client_address_are_dropped(name: str) -> None:
    spellings = [name, name.lower(), name.upper(), name.replace("-", "_")]
    assert upstream_request_headers([(spelling, "x") for spelling in spellings], set()) == []


ORDINARY = [
    "Accept",
    "Accept-Language",
    "Content-Type",
    "If-None-Match",
    "If-Match",
    "If-Modified-Since",
    "Idempotency-Key",
    "X-Request-Id",
    "User-Agent",
    "Prefer",
    "Stripe-Version",
    "Stripe-Account",
    "Notion-Version",
    "OpenAI-Organization",
    "X-GitHub-Api-Version",
    "X-Goog-User-Project",
    "X-Goog-Upload-Protocol",
    "X-Goog-Upload-Command",
    "X-Amz-Date",
    "X-Amz-Copy-Source",
    "x-ms-version",
    "x-ms-date",
    "Dropbox-API-Path-Root",
    "Upload-Offset",
    "Tus-Resumable",
]


def test_ordinary_api_headers_pass() -> None:
    sent = [(name, "v") for name in ORDINARY]
    assert upstream_request_headers(sent, set()) == sent


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
            redact=Redactor(["sk/live 1"]),
            media_type=parse("application/json"),
        )
    )
    assert kept == {
        "content-type": "application/json",
        "link": '<https://api.example.com/v1?page=2&key=[redacted]>; rel="next"',
        "content-location": "/v1?key=[redacted]",
        "x-ratelimit-remaining": "5",
    }


def test_headers_an_http_server_cannot_write_are_dropped() -> None:
    """A control byte in a value (uvicorn raises on it, dropping the app's connection), or a name
    that is not a token, drops the header; a tab is a value's own."""
    kept = app_response_headers(
        [
            ("Cache-Control", "a\x01b\x7fc"),
            ("Link", "<https://x.example/>\x1b[0m"),
            ("ETag", '"v1"\x00'),
            ("Content-Disposition", "inline;\tfilename=a.txt"),
            ("X-RateLimit-a(b", "1"),
            ("RateLimit-Policy", "10;w=1"),
        ],
        media_type=None,
    )
    assert kept == [
        ("content-disposition", "inline;\tfilename=a.txt"),
        ("ratelimit-policy", "10;w=1"),
    ]


def test_a_value_cut_over_two_headers_loses_both_pieces() -> None:
    secret = "sk_live_0123456789abcdef"
    kept = app_response_headers(
        [
            ("Link", f'<https://x.example/?a={secret[:12]}>; rel="prev"'),
            ("Link", f'<https://x.example/?b={secret[12:]}>; rel="next"'),
            ("X-RateLimit-Remaining", "5"),
        ],
        redact=Redactor([secret]),
        media_type=None,
    )
    assert kept == [
        ("link", '<https://x.example/?a=[redacted]>; rel="prev"'),
        ("link", '<https://x.example/?b=[redacted]>; rel="next"'),
        ("x-ratelimit-remaining", "5"),
    ]


def test_the_app_gets_one_content_type_the_one_a_browser_reads() -> None:
    """The upstream's Content-Type headers never pass as they are: two of them (a browser reads
    the last), a value with a control byte (dropped downstream, and the body sniffed) or
    parameters as written give way to the type read, serialised."""
    answered = [
        ("Content-Type", "application/json"),
        ("Content-Type", "Text/HTML ; charset=UTF-8 ; x=\x01"),
        ("Cache-Control", "no-store"),
    ]
    media_type = extract(value for name, value in answered if name == "Content-Type")
    assert app_response_headers(answered, media_type=media_type) == [
        ("content-type", "text/html;charset=UTF-8"),
        ("cache-control", "no-store"),
    ]
    unreadable = [("Content-Type", "application/json\x0b"), ("Cache-Control", "no-store")]
    assert extract(["application/json\x0b"]) is None
    assert app_response_headers(unreadable, media_type=None) == [("cache-control", "no-store")]


def test_the_content_type_relayed_is_scrubbed_of_injected_values() -> None:
    secret = "sk_live_0123456789abcdef"
    kept = app_response_headers(
        [("Content-Type", f"application/json; echo={secret}")],
        redact=Redactor([secret]),
        media_type=parse(f"application/json; echo={secret}; bytes=\u00e9"),
    )
    assert kept == [("content-type", 'application/json;echo=[redacted];bytes="\u00e9"')]


def test_the_connections_own_headers_stand_in_for_the_apps_in_any_spelling() -> None:
    """What the body rules read and the sender sends: the connection's Content-Type, not the
    app's under any name a server reads as it."""
    sent = upstream_request_headers(
        [("Content-Type", "text/plain"), ("content_type", "text/plain"), ("X-Trace", "1")],
        injected=set(),
        own=[("Content-Type", "application/x-www-form-urlencoded")],
    )
    assert sent == [("X-Trace", "1"), ("Content-Type", "application/x-www-form-urlencoded")]
