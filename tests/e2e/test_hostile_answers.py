"""Upstream answers that would hand app code the injected credential, or break the app's
connection (red-team round 3, N7 and N8), through the real proxy and API server: the key echoed
in forms an app could undo, compressed though identity was asked for, cut over two headers; a 101
nobody asked for, control bytes in a header, and the other malformed heads round 3 tried."""

from __future__ import annotations

import json
import re
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.echoes import COMPRESSED, FORMS, leaks
from gatehouse_dev.raw_upstream import RawUpstream
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import (
    API_KEY_AUTH,
    app_token,
    apply,
    connection,
    connection_test,
    data_app,
    fetch,
    finished,
    secret,
    wait_condition,
)

pytestmark = pytest.mark.e2e

KEY = "sk_live_Hostile/0123456789+abcdef"


def _linked(cluster: Cluster, namespace: str, origins: dict[str, str], **spec: Any) -> str:
    """A connection per alias to its origin, injecting KEY as X-API-Key (``spec`` added to
    each); the app's token."""
    apply(cluster, namespace, secret("vendor", **{"api-key": KEY}))
    apply(
        cluster,
        namespace,
        *(
            connection(alias, origin, API_KEY_AUTH, limits={"requestsPerMinute": 10_000}, **spec)
            for alias, origin in origins.items()
        ),
        data_app("sales", {alias: alias for alias in origins}),
    )
    for alias in origins:
        wait_condition(cluster, namespace, f"externalconnection/{alias}", "True", "Routed")
    wait_condition(cluster, namespace, "dataapp/sales", "True", "Routed")
    return app_token(cluster, namespace, "dataapp-sales-gatehouse")


def _pieces(value: str, size: int = 8) -> set[str]:
    return {value[at : at + size] for at in range(len(value) - size + 1)}


def test_the_app_never_gets_the_key_in_any_form(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    token = _linked(cluster, namespace, {"vendor": stack.upstream})
    gzip_please = {"Accept-Encoding": "gzip, br"}
    for form in FORMS:
        reply = fetch(stack.proxy, token, "vendor", f"/echo-as/{form}", headers=gzip_please)
        assert reply.status_code == 200, (form, reply.text)
        assert not leaks(reply.content, KEY), (form, reply.content)
    for coding in COMPRESSED:
        reply = fetch(stack.proxy, token, "vendor", f"/compressed/{coding}", headers=gzip_please)
        assert not leaks(reply.content, KEY), (coding, reply.content)
        if coding == "br":
            assert reply.status_code == 502
            assert reply.json()["error"]["code"] == "unsupported_encoding"
            continue
        assert reply.status_code == 200, (coding, reply.text)
        assert "content-encoding" not in reply.headers
        assert reply.json()["key"] == "[redacted]"
    # A bomb: 5 MB of padding, a few KiB compressed, past the default 1 MiB cap.
    with pytest.raises(httpx.RemoteProtocolError):
        fetch(stack.proxy, token, "vendor", "/compressed/gzip", params={"pad": "5000000"})
    split = fetch(stack.proxy, token, "vendor", "/split-link")
    links = split.headers.get_list("link")
    assert len(links) == 2
    assert all("[redacted]" in link for link in links)
    assert not any(piece in link for link in links for piece in _pieces(KEY))
    # A connection test shows the answer decoded, and the key redacted.
    apply(cluster, namespace, connection_test("gz", "vendor", path="/compressed/gzip-members"))
    response = finished(cluster, namespace, "gz")["status"]["response"]
    assert json.loads(response["body"])["key"] == "[redacted]"
    assert KEY not in json.dumps(response)


def _raw_fetch(proxy: str, token: str, path: str, method: str = "GET") -> tuple[bytes, bytes]:
    """The head and body bytes the app receives, as a socket reads them (a client library would
    hide an interim answer or a malformed head)."""
    address = urlsplit(proxy)
    with socket.create_connection((address.hostname, address.port), timeout=5) as conn:
        conn.sendall(
            f"{method} /v1/fetch/raw{path} HTTP/1.1\r\nHost: proxy\r\n"
            f"Authorization: Bearer {token}\r\nAccept-Encoding: gzip\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        chunks, rest = [], body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            chunks.append(rest[:size])
            rest = rest[size + 2 :]
        body = b"".join(chunks)
    return head, body


def test_malformed_answers_reach_no_app(cluster: Cluster, stack: Stack, namespace: str) -> None:
    with RawUpstream() as raw:
        token = _linked(cluster, namespace, {"raw": raw.url})
        log = stack.proxies[0].server.log_path
        logged_before = len(log.read_text())

        head, body = _raw_fetch(stack.proxy, token, "/switching")
        assert head.startswith(b"HTTP/1.1 502 "), head
        assert json.loads(body)["error"]["code"] == "upstream_informational"
        # Its connection is closed, not pooled for the next request.
        assert raw.outcomes(1) == [("/switching", "closed")]

        for _ in range(3):
            head, body = _raw_fetch(stack.proxy, token, "/control-bytes")
            assert head.startswith(b"HTTP/1.1 200 "), head
            assert body == b"ok"
            assert not re.search(rb"[\x00-\x08\x0a-\x1f\x7f]", head.replace(b"\r\n", b""))
            assert b"link: <https://x.example/a>;\trel=next" in head.lower()

        head, body = _raw_fetch(stack.proxy, token, "/transfer-gzip")
        assert (head[:13], body) == (b"HTTP/1.1 200 ", b"key [redacted]")

        # Round 3's other malformed heads, which held then, hold still.
        for path in ("/bare-cr", "/obs-fold", "/lf-only"):
            head, _ = _raw_fetch(stack.proxy, token, path)
            lines = head.lower().split(b"\r\n")
            assert not any(line.startswith(b"set-cookie:") for line in lines), (path, head)
        head, body = _raw_fetch(stack.proxy, token, "/cl-te")
        assert b"evil!" not in body
        head, _ = _raw_fetch(stack.proxy, token, "/many-headers")
        assert len(head) <= 17 * 1024
        head, body = _raw_fetch(stack.proxy, token, "/head-body", method="HEAD")
        assert body == b""
        for path in ("/early-hints", "/trailer", "/split-link", "/latin1"):
            head, body = _raw_fetch(stack.proxy, token, path)
            assert not leaks(head + b"\r\n\r\n" + body, KEY), (path, head, body)
            assert not any(piece.encode() in head for piece in _pieces(KEY)), (path, head)

        time.sleep(0.5)  # the server's log lines of the last answers
        logged = log.read_text()[logged_before:]
        assert "Traceback" not in logged
        assert "Invalid HTTP header" not in logged
        assert KEY not in logged


def test_the_type_a_browser_reads_is_checked_and_is_the_one_relayed(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    """Round four's R4-7 and the grown suite's class 2: with only JSON allowed, an answer that is
    HTML to a browser (its type twice, a comma in its parameters) or that has no type a browser
    reads (a control byte or a Unicode space after it: dropped downstream, then sniffed) is
    refused; what passes has exactly one Content-Type, the one checked, and nosniff."""
    with RawUpstream() as raw:
        token = _linked(
            cluster, namespace, {"raw": raw.url}, allowedContentTypes=["application/json"]
        )
        for path in ("/type-twice", "/type-comma"):
            head, body = _raw_fetch(stack.proxy, token, path)
            assert head.startswith(b"HTTP/1.1 502 "), (path, head)
            error = json.loads(body)["error"]
            assert error["code"] == "content_type_not_allowed", path
            assert "'text/html'" in error["message"], path
            assert b"<script>" not in body
        for path in ("/type-control", "/type-no-break-space", "/type-ideographic-space"):
            head, body = _raw_fetch(stack.proxy, token, path)
            assert head.startswith(b"HTTP/1.1 502 "), (path, head)
            assert json.loads(body)["error"]["code"] == "content_type_not_allowed", path
        for path, relayed in (
            ("/type-parameters", b'application/json;x="<script>"'),
            ("/type-quoted-comma", b'application/json;x=",text/html"'),
        ):
            head, _ = _raw_fetch(stack.proxy, token, path)
            assert head.startswith(b"HTTP/1.1 200 "), (path, head)
            lines = head.lower().split(b"\r\n")
            assert [line for line in lines if line.startswith(b"content-type:")] == [
                b"content-type: " + relayed.lower()
            ], path
            assert b"x-content-type-options: nosniff" in lines, path
        # A connection test is refused as an app's fetch is, naming the type a browser reads.
        apply(cluster, namespace, connection_test("twice", "raw", path="/type-twice"))
        conditions = finished(cluster, namespace, "twice")["status"]["conditions"]
        verdict = next(c for c in conditions if c["type"] == "Passed")
        assert verdict["reason"] == "ContentTypeNotAllowed", verdict
        assert "'text/html'" in verdict["message"]


def test_every_relayed_answer_says_nosniff(cluster: Cluster, stack: Stack, namespace: str) -> None:
    """Without allowed types too: the app's browser takes the one type relayed as it is."""
    token = _linked(cluster, namespace, {"vendor": stack.upstream})
    reply = fetch(stack.proxy, token, "vendor", "/echo/v1")
    assert reply.status_code == 200
    assert reply.headers.get_list("content-type") == ["application/json;charset=utf-8"]
    assert reply.headers.get_list("x-content-type-options") == ["nosniff"]
