"""What reading request bodies for parameters costs the proxy
(``gatehouse_proxy.rules.body_rules``).

Each body is 10 MiB (the largest ``limits.maxRequestBytes``) in the 64 KiB pieces the proxy
keeps, checked as a fetch checks it on a connection whose API key goes in the query: the time
``check_body`` takes (in its worker thread: bodies this large never touch the event loop) and the
memory it holds at its peak beyond the body itself. First the bodies apps send, then bodies built
to be slow to read.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import tracemalloc
from collections.abc import Callable

from gatehouse_proxy.rules.body_rules import check_body

MIB = 1024 * 1024
SIZE = 10 * MIB
ALLOWED = frozenset({"GET", "POST"})
JSON = [("content-type", "application/json")]
FORM = [("content-type", "application/x-www-form-urlencoded")]
MULTIPART = [("content-type", "multipart/form-data; boundary=XyZ")]
RECORD = {"id": 12345, "name": "Zoë Smith", "email": "zoe@example.com", "tags": ["a", "bb"]}


def _records(count: int, ascii_only: bool) -> list[dict[str, object]]:
    return [RECORD if not ascii_only else {**RECORD, "name": "Al"}] * count


def _part(name: bytes, value: bytes) -> bytes:
    head = b'--XyZ\r\nContent-Disposition: form-data; name="' + name + b'"\r\n\r\n'
    return head + value + b"\r\n"


CASES: list[tuple[str, list[tuple[str, str]], Callable[[], bytes]]] = [
    (
        "JSON object of records, no name in it (the first look only)",
        JSON,
        lambda: json.dumps({"rows": _records(SIZE // 85, True)}).encode(),
    ),
    (
        "JSON array of records with \\u escapes (no parameters)",
        JSON,
        lambda: json.dumps(_records(SIZE // 95, False)).encode(),
    ),
    (
        "JSON object of records with \\u escapes (read)",
        JSON,
        lambda: json.dumps({"rows": _records(SIZE // 95, False)}).encode(),
    ),
    (
        "form with escapes in its values",
        FORM,
        lambda: b"&".join([b"q=caf%C3%A9"] * (SIZE // 12)),
    ),
    (
        "multipart upload of one file",
        MULTIPART,
        lambda: _part(b"file", os.urandom(SIZE - 100)) + b"--XyZ--\r\n",
    ),
    (
        "built to be slow: JSON object of one-letter keys",
        JSON,
        lambda: b'{"\\u0041":0' + b',"a":0' * (SIZE // 6) + b"}",
    ),
    (
        "built to be slow: JSON values nested 33 deep",
        JSON,
        lambda: b'{"\\u0041":0' + (b',"a":' + b"[" * 33 + b"]" * 33) * (SIZE // 72) + b"}",
    ),
    ("built to be slow: form of one-byte fields", FORM, lambda: b"%&" + b"a&" * (SIZE // 2)),
    (
        "built to be slow: multipart of empty parts",
        MULTIPART,
        lambda: _part(b"a", b"") * (SIZE // 50) + b"--XyZ--\r\n",
    ),
]


def measure() -> list[tuple[str, float, float, float]]:
    """Each case: its size (MiB), the check's time (ms, best of three) and its peak (MiB)."""
    rows = []
    for label, headers, make in CASES:
        body = make()
        pieces = [body[start : start + 65536] for start in range(0, len(body), 65536)]

        def check(headers: list[tuple[str, str]] = headers, pieces: list[bytes] = pieces) -> None:
            asyncio.run(check_body("bench", headers, pieces, ALLOWED, "key"))

        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            check()
            best = min(best, time.perf_counter() - started)
        tracemalloc.start()
        check()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rows.append((label, len(body) / MIB, best * 1000, peak / MIB))
    return rows


def table(rows: list[tuple[str, float, float, float]]) -> str:
    lines = ["| body | MiB | ms | MiB held beyond the body |", "|---|---|---|---|"]
    lines += [f"| {label} | {size:.1f} | {ms:.0f} | {held:.1f} |" for label, size, ms, held in rows]
    return "\n".join(lines)
