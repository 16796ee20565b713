"""A real third-party API stand-in on 127.0.0.1 for tests and the demo.

``/echo/...`` answers with what it received (method, path, query, headers, body, and a JSON body
parsed, and a request id), so a test can assert exactly what the proxy sent; ``/_received/{id}``
answers the same record to a caller that asks the upstream directly, not through the proxy, and
``/_arrivals`` how many times each request arrived (method, path and query), and ``/_calls`` how
many calls each path's first segment received, and when the last came. The
other routes misbehave on purpose: a redirect, a huge or endless body, a slow answer, a body that
breaks off or stalls half-way, cookies and internal headers to strip, any status and header, and
the injected credential echoed in forms an app could undo (``/echo-as/{form}``, see echoes), in
a body compressed though identity was asked for (``/compressed/{coding}``), or cut in two over
two Link headers (``/split-link``).

``python -m gatehouse_dev.upstream --port 18080`` serves it; tests start it as a subprocess. With
``--tls-port``, ``--tls-cert``, ``--tls-key`` and ``--client-ca`` it serves the same routes over TLS
too, on that port, to clients whose certificate that CA issued (mTLS, as vendors that require one):
an echo then records the certificate presented (``clientCertificate``: its subject and serial).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import ssl
import time
import uuid
from collections import OrderedDict
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from multidict import CIMultiDict

from gatehouse_dev.echoes import COMPRESSED, FORMS, injected

# What the upstream received, by request id, for tests that ask it directly (the proxy scrubs
# injected credentials from the echo apps get back). Bounded: the oldest records go first.
RECEIVED: OrderedDict[str, dict[str, Any]] = OrderedDict()
KEEP_RECEIVED = 10_000
# How many times each "METHOD /path?query" arrived, for tests that count side effects.
ARRIVALS: OrderedDict[str, int] = OrderedDict()


async def echo(request: web.Request) -> web.Response:
    body = await request.read()
    try:
        parsed = json.loads(body) if request.content_type == "application/json" else None
    except ValueError:
        parsed = None
    request_id = uuid.uuid4().hex
    seen = {
        "id": request_id,
        "json": parsed,
        "method": request.method,
        "path": request.raw_path.partition("?")[0],
        "query": request.raw_path.partition("?")[2],
        "headers": {name.lower(): value for name, value in request.headers.items()},
        "body": body.decode("utf-8", "replace"),
    }
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    if peer:
        subject = ",".join(f"{k}={v}" for rdn in peer.get("subject", ()) for k, v in rdn)
        seen["clientCertificate"] = {"subject": subject, "serial": peer.get("serialNumber", "")}
    RECEIVED[request_id] = seen
    while len(RECEIVED) > KEEP_RECEIVED:
        RECEIVED.popitem(last=False)
    return web.json_response(
        seen,
        headers={
            "Set-Cookie": "session=upstream-secret",
            "X-Internal-Trace": "node-7",
            "X-RateLimit-Remaining": "99",
            "ETag": '"v1"',
            # Pagination as many APIs do it: the next page's URL, query (and key) included.
            "Link": f'<{request.url.with_query(request.query_string + "&page=2")}>; rel="next"',
        },
    )


async def received(request: web.Request) -> web.Response:
    seen = RECEIVED.get(request.match_info["id"])
    if seen is None:
        raise web.HTTPNotFound()
    return web.json_response(seen)


async def redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound("http://127.0.0.1:9/elsewhere")


# What /big repeats: bytes that cost a reader the most in their own way (``?fill=``).
FILLS = {
    "x": (b"x", "application/octet-stream"),
    "strings": (b'"a",', "application/json"),  # a JSON array of a million short strings
    "percent": (b"%41", "text/plain"),  # an escape in every third byte, for the scrubber
    "control": (b"\x01", "text/plain"),  # six bytes each once escaped in JSON
}


async def big(request: web.Request) -> web.StreamResponse:
    size = int(request.query.get("bytes", "2000000"))
    chunked = request.query.get("chunked") == "1"
    unit, content_type = FILLS[request.query.get("fill", "x")]
    response = web.StreamResponse(headers={"Content-Type": content_type})
    if not chunked:
        response.content_length = size
    await response.prepare(request)
    block = unit * (65536 // len(unit) + 1)
    sent = 0
    while sent < size:
        part = min(65536, size - sent)
        await response.write(block[:part])
        sent += part
    await response.write_eof()
    return response


async def broken(request: web.Request) -> web.StreamResponse:
    """Starts a chunked answer, then closes the connection (``?then=close``) or goes silent."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    await response.write(b'{"items": [')
    if request.query.get("then") == "stall":
        await asyncio.sleep(float(request.query.get("seconds", "30")))
    elif request.transport is not None:
        request.transport.abort()
    return response


async def slow(request: web.Request) -> web.Response:
    """Answers after ``?seconds=``, reading a request body only then (the proxy holds it)."""
    await asyncio.sleep(float(request.query.get("seconds", "5")))
    return web.json_response({"slow": True, "received": len(await request.read())})


async def arrivals(request: web.Request) -> web.Response:
    return web.json_response(ARRIVALS)


async def status(request: web.Request) -> web.Response:
    """Answers with the status in the path, and every ``?header=Name:value`` it is asked for."""
    headers = CIMultiDict(
        header.partition(":")[::2] for header in request.query.getall("header", []) if header
    )
    return web.json_response({}, status=int(request.match_info["code"]), headers=headers)


async def cacheable(request: web.Request) -> web.Response:
    """An answer for a cache: held ``?delay=`` seconds, with every ``?header=Name:value`` asked
    for (Cache-Control, Vary, Set-Cookie...), an ETag of ``?version=`` that an If-None-Match
    naming it is answered 304 to, ``?size=`` bytes of padding, the key the proxy injected (the
    proxy scrubs it from what the app gets, and from what it keeps) and an id of its own, so
    that a test tells one call's answer from another's."""
    await asyncio.sleep(float(request.query.get("delay", "0")))
    headers = CIMultiDict(
        header.partition(":")[::2] for header in request.query.getall("header", []) if header
    )
    etag = f'"{request.query.get("version", "v1")}"'
    headers["ETag"] = etag
    if request.headers.get("If-None-Match") == etag:
        return web.Response(status=304, headers=headers)
    body = {
        "id": uuid.uuid4().hex,
        "path": request.path,
        "key": injected(request.headers),
        "language": request.headers.get("Accept-Language", ""),
        "pad": "x" * int(request.query.get("size", "0")),
    }
    return web.json_response(body, headers=headers)


async def echo_as(request: web.Request) -> web.Response:
    form = FORMS.get(request.match_info["form"])
    if form is None:
        raise web.HTTPNotFound()
    body = b"<p>the key you sent: " + form(injected(request.headers)) + b"</p>"
    return web.Response(body=body, content_type="text/html")


async def compressed(request: web.Request) -> web.Response:
    coding = COMPRESSED.get(request.match_info["coding"])
    if coding is None:
        raise web.HTTPNotFound()
    encoding, compress = coding
    # ?pad= makes it a bomb: megabytes of padding compress to kilobytes.
    pad = "x" * int(request.query.get("pad", "100"))
    body = json.dumps({"error": "bad key", "key": injected(request.headers), "pad": pad})
    return web.Response(
        body=compress(body.encode()),
        headers={"Content-Type": "application/json", "Content-Encoding": encoding},
    )


async def split_link(request: web.Request) -> web.Response:
    value = injected(request.headers)
    half = len(value) // 2
    headers = CIMultiDict(
        [
            ("Link", f'<https://x.example/?a={value[:half]}>; rel="first"'),
            ("Link", f'<https://x.example/?b={value[half:]}>; rel="last"'),
        ]
    )
    return web.json_response({}, headers=headers)


# Calls received per path (its first segment), and when the last one came: what a test of the
# proxy's limits counts. Asked of the upstream directly at /_calls (not counted).
CALLS: collections.Counter[str] = collections.Counter()
LAST_CALL: dict[str, float] = {}


@web.middleware
async def _counted(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every call but the test's own questions (``/_...``): per first segment (/_calls), and
    per request line (/_arrivals: what a test sent once must have arrived once), bounded."""
    if not request.path.startswith("/_"):
        segment = "/" + request.path.lstrip("/").partition("/")[0]
        CALLS[segment] += 1
        LAST_CALL[segment] = time.time()
        arrival = f"{request.method} {request.raw_path}"
        ARRIVALS[arrival] = ARRIVALS.pop(arrival, 0) + 1
        while len(ARRIVALS) > KEEP_RECEIVED:
            ARRIVALS.popitem(last=False)
    return await handler(request)


async def calls(request: web.Request) -> web.Response:
    return web.json_response({"calls": dict(CALLS), "last": LAST_CALL})


def create_app() -> web.Application:
    # Bodies as large as a connection may allow (aiohttp refuses past 1 MiB by default).
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[_counted])
    app.router.add_get("/_calls", calls)
    app.router.add_route("*", "/echo{tail:.*}", echo)
    app.router.add_get("/_received/{id}", received)
    app.router.add_get("/_arrivals", arrivals)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/big", big)
    app.router.add_route("*", "/slow", slow)
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/broken", broken)
    app.router.add_get("/echo-as/{form}", echo_as)
    app.router.add_route("*", "/cacheable{tail:.*}", cacheable)
    app.router.add_route("*", "/compressed/{coding}", compressed)
    app.router.add_get("/split-link", split_link)
    return app


def client_certificate_context(cert: str, key: str, client_ca: str) -> ssl.SSLContext:
    """A server's TLS that requires a client certificate issued by ``client_ca``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=client_ca)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(cert, key)
    return context


async def serve(args: argparse.Namespace) -> None:
    runner = web.AppRunner(create_app())
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port).start()
    if args.tls_port:
        tls = client_certificate_context(args.tls_cert, args.tls_key, args.client_ca)
        await web.TCPSite(runner, args.host, args.tls_port, ssl_context=tls).start()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls-port", type=int, default=0, help="serve over mTLS here too")
    parser.add_argument("--tls-cert", help="the server's certificate chain (PEM)")
    parser.add_argument("--tls-key", help="its key (PEM)")
    parser.add_argument("--client-ca", help="the CA client certificates must chain to (PEM)")
    args = parser.parse_args()
    if not args.tls_port:
        web.run_app(create_app(), host=args.host, port=args.port, print=None)
        return
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
