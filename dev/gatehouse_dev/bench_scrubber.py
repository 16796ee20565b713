"""What scrubbing an answer costs: the redactor of one credential over bodies fed in 64 KiB chunks,
as the relay feeds them, and the per-answer work of a small JSON answer and its headers. The
redactor is given the forms the credential is sent in (sent_forms): a bearer token's one, and a
query key's two (as it is, and percent-encoded), also over URLs percent-encoded twice.

Every body here is free of the credential (the common case, and the costly one: nothing ends the
search early). Throughput is the best of a few runs, in one process, on the event loop's thread as
the proxy runs it, so compare figures of the same machine only.
"""

from __future__ import annotations

import base64
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from gatehouse_contract import sent_forms
from gatehouse_contract.redaction import BodyScrubber, Redactor
from gatehouse_proxy.http.media_types import extract
from gatehouse_proxy.rules.headers import app_response_headers

CHUNK = 64 * 1024
BODY_BYTES = 8 * 1024 * 1024
RUNS = 3
TOKEN = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"  # noqa: S105 (a bench's made-up credential)
# A credential with a slash, against a body that escapes every slash: the most escapes of one of
# its characters a JSON body can hold.
SLASHED = "sk_live/4eC39HqLyjWDarjtT1zdp7dc"
# A base64-style key sent in the query: percent-encoding changes + / =.
QUERY_KEY = "sk_live+4eC39/HqLyjWDarjtT1zdp7="


def _repeat(unit: bytes) -> bytes:
    return (unit * (BODY_BYTES // len(unit) + 1))[:BODY_BYTES]


def _records() -> bytes:
    return _repeat(
        b'{"id": 12345, "name": "Ada Lovelace", "plan": "team", "seats": 14, "active": true}, '
    )


def _log_lines() -> bytes:
    return _repeat(b"2026-01-05 12:00:00 INFO GET /v1/items/42 200 12ms user=7 region=eu-west-1\n")


def _escaped_json() -> bytes:
    rows = [
        {
            "url": f"https://x.example/a/{n}?q=%20&r=&amp;",
            "name": 'Zoë "the" café',
            "path": "C:\\data\\x",
        }
        for n in range(200)
    ]
    return _repeat(json.dumps(rows).encode())


def _slashes() -> bytes:
    return _repeat(b'{"u": "https:\\/\\/x.example\\/a\\/b\\/c\\/d"}, ')


def _urls_encoded_twice() -> bytes:
    """Login links that embed another URL, as every line of the body: %25 throughout."""
    return _repeat(
        b'{"login": "https://x.example/login?return_to=https%253A%252F%252Fapi.example.com'
        b'%252Fv1%252Fitems%253Fpage%253D2%2526q%253Da%252520b"}, '
    )


def _wrapped_base64() -> bytes:
    blob = base64.encodebytes(
        random.Random(7).randbytes(  # noqa: S311 (filler, not a key)
            BODY_BYTES * 3 // 4
        )
    )
    return blob.replace(b"\n", b"\r\n")[:BODY_BYTES]


@dataclass(frozen=True)
class Case:
    label: str
    body: Callable[[], bytes]
    forms: tuple[str, ...] = sent_forms.bearer(TOKEN).forms


CASES = (
    Case("JSON records, no escapes", _records),
    Case("log lines (a line break every 75 bytes), no escapes", _log_lines),
    Case('escape-heavy JSON (\\u00eb, \\", \\\\, %20, &amp;)', _escaped_json),
    Case("base64 wrapped at 76 (MIME, CRLF)", _wrapped_base64),
    Case(
        "worst: every / escaped as \\/, a credential with /",
        _slashes,
        sent_forms.bearer(SLASHED).forms,
    ),
    Case(
        "JSON records, a query key with + / = (its 2 forms)",
        _records,
        sent_forms.query_value(QUERY_KEY).forms,
    ),
    Case("URLs percent-encoded twice (%25 in every line)", _urls_encoded_twice),
    Case(
        "URLs percent-encoded twice, that query key",
        _urls_encoded_twice,
        sent_forms.query_value(QUERY_KEY).forms,
    ),
)


def throughput(body: bytes, forms: tuple[str, ...]) -> float:
    """MB/s through a fresh scrubber, best of RUNS."""
    chunks = [body[at : at + CHUNK] for at in range(0, len(body), CHUNK)]
    best = float("inf")
    for _ in range(RUNS):
        scrubber = BodyScrubber(Redactor(forms))
        started = time.perf_counter()
        for chunk in chunks:
            scrubber.feed(chunk)
        scrubber.flush()
        best = min(best, time.perf_counter() - started)
    return len(body) / best / 1e6


def per_answer_us(rounds: int = 20_000) -> tuple[float, float]:
    """Microseconds to build a redactor, and to scrub a small JSON answer and its headers with
    it, as the relay does for each answer."""
    body = b'{"id": "ch_1", "amount": 1200, "currency": "eur", "status": "succeeded"}'
    headers = [
        ("Content-Type", "application/json"),
        ("Link", '<https://api.example.com/v1/charges?starting_after=ch_1>; rel="next"'),
        ("Cache-Control", "no-store"),
        ("X-RateLimit-Remaining", "99"),
    ]
    started = time.perf_counter()
    for _ in range(rounds):
        Redactor([TOKEN])
    build = (time.perf_counter() - started) / rounds * 1e6
    redact = Redactor([TOKEN])
    started = time.perf_counter()
    for _ in range(rounds):
        redact(body)
        media_type = extract(value for name, value in headers if name == "Content-Type")
        app_response_headers(headers, redact, media_type=media_type)
    scrub = (time.perf_counter() - started) / rounds * 1e6
    return build, scrub


def table() -> str:
    lines = ["| body (8 MiB, 64 KiB chunks) | MB/s |", "|---|---|"]
    for case in CASES:
        lines.append(f"| {case.label} | {throughput(case.body(), case.forms):,.0f} |")
    build, scrub = per_answer_us()
    lines.append(
        f"\nA redactor: {build:.1f} µs; a small JSON answer and 4 headers: {scrub:.1f} µs."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
