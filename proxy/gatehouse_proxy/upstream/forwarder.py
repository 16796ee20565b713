"""Sending the checked request upstream and streaming the answer back, within the limits.

aiohttp, not httpx, makes the upstream call: under concurrency httpx's pool is about six times
slower (see docs/development/performance.md, "Why aiohttp on the hot path"). Redirects are refused,
never followed: an open redirect on an allowed host would otherwise carry the injected credential
anywhere. So is an interim (1xx) status given as the final answer (aiohttp returns a 101 as one):
nothing was upgraded, and its connection is closed, never pooled. An answer compressed though
identity was asked for is decoded on its way (see content_coding).
"""

from __future__ import annotations

import contextlib
import functools
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import aiohttp
from yarl import URL

from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.http import content_coding, media_types
from gatehouse_proxy.upstream.network_guard import (
    BlockedAddressError,
    GuardedResolver,
    NetworkPolicy,
)

_CHUNK = 64 * 1024
USER_AGENT = "gatehouse-proxy"


def tls_context(ca_file: str | None = None) -> ssl.SSLContext:
    """The upstreams' TLS settings, made once per process: loading the system's trust store
    takes tens of milliseconds of CPU, too long to spend on the event loop per new pool."""
    tls = ssl.create_default_context()
    if ca_file:
        # Added to the system's trust, not instead of it: public upstreams and Google's token
        # endpoint keep working beside the private ones the installation's CA signs.
        tls.load_verify_locations(cafile=ca_file)
    return tls


@dataclass(frozen=True, slots=True)
class ConnectionTls:
    """A connection's own TLS settings (see connection_tls): its context, and whether it
    presents a client certificate."""

    context: ssl.SSLContext
    client_certificate: bool


def new_session(
    policy: NetworkPolicy, tls: ssl.SSLContext, pool_size: int = 100
) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(
        resolver=GuardedResolver(policy),
        ssl=tls,
        limit=pool_size,
        limit_per_host=0,  # the connection's own concurrency cap applies instead
        ttl_dns_cache=30,
    )
    return aiohttp.ClientSession(
        connector=connector,
        # Compressed bodies pass through as they are: nothing decompresses (no bombs in here).
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        headers={"User-Agent": USER_AGENT},
    )


@functools.lru_cache(maxsize=64)
def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    """One per connection's limit, made once rather than per request (frozen: safe to share)."""
    return aiohttp.ClientTimeout(total=seconds)


def is_redirect(status: int) -> bool:
    """A redirect: never followed, refused for apps (a test shows it). 304 is not one."""
    return 300 <= status < 400 and status != 304


@contextlib.contextmanager
def _reading_the_answer() -> Iterator[None]:
    """An answer's body being read: an upstream that runs out of time or breaks off half-way,
    as the app is told it."""
    try:
        yield
    except TimeoutError:
        raise ProxyError(
            "upstream_timeout", "the upstream did not finish its answer in time"
        ) from None
    except (aiohttp.ClientError, OSError):
        raise ProxyError("upstream_failed", "the upstream broke off its answer") from None


@dataclass(frozen=True)
class RequestBody:
    """An app's request body, read whole, sent in the pieces it was read in.

    One write of megabytes would copy them all in one step of the event loop (into the socket,
    then what did not fit into the transport's buffer), while every other request waits.
    ``pace`` is awaited before each piece: the tenant's turn (see ``tenancy.Turns``).
    """

    pieces: Sequence[bytes] = ()
    pace: Callable[[], Awaitable[None]] | None = None

    @property
    def size(self) -> int:
        return sum(len(piece) for piece in self.pieces)

    async def stream(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            if self.pace is not None:
                await self.pace()
            yield piece


NO_BODY = RequestBody()


def _bodiless(method: str, status: int) -> bool:
    return method == "HEAD" or status in (204, 304)


@dataclass
class Upstream:
    response: aiohttp.ClientResponse
    max_bytes: int
    # The codings its body is decoded from (see content_coding), and what is awaited before each
    # step of decoding (the tenant's turn).
    codings: tuple[str, ...] = ()
    pace: Callable[[], Awaitable[None]] | None = None
    # Set when body(stop_at_limit=True) stopped at max_bytes with more to come.
    over_limit: bool = False
    # What read_up_to read of a body past its limit: body() sends it first.
    pending: list[bytes] = field(default_factory=list)

    @property
    def status(self) -> int:
        return self.response.status

    @cached_property
    def media_type(self) -> media_types.MediaType | None:
        """The type a browser reads in the answer's Content-Type headers (see media_types), read
        once: what is checked against the allowed types, relayed to the app and shown by a
        test."""
        values = self.response.headers.getall("content-type", [])
        return media_types.extract(media_types.as_sent(value) for value in values)

    def headers(self) -> list[tuple[str, str]]:
        """The answer's headers, without Content-Encoding once its body is decoded."""
        headers = self.response.headers.items()
        if self.codings:
            return [(name, value) for name, value in headers if name.lower() != "content-encoding"]
        return list(headers)

    def whole_body(self) -> bytes | None:
        """The whole body if it is already in the buffer (taken without waiting for anything;
        the connection goes back to the pool), else None: it is to be streamed, as is a body to
        be decoded (what it inflates to is known only step by step).

        Raises :class:`ProxyError` if it is over ``max_bytes``: an error answer can still be
        given, since nothing has been sent to the app yet.
        """
        content = self.response.content
        if self.codings or self.pending or not content.is_eof() or content.exception() is not None:
            return None
        body = content.read_nowait()
        self.release()
        if len(body) > self.max_bytes:
            raise ProxyError(
                "response_too_large", f"the upstream response exceeds {self.max_bytes} bytes"
            )
        return body

    async def read_up_to(self, limit: int) -> bytes | None:
        """The whole body if it is at most ``limit`` bytes, else None, with what was read kept
        for :meth:`body` to send first (the cache keeps small answers and streams the others
        as the relay would, holding no more than ``limit`` of them). A body being decoded is
        not read ahead: None at once."""
        if self.codings:
            return None
        whole = self.whole_body()
        if whole is not None:
            return whole
        read: list[bytes] = []
        size = 0
        with _reading_the_answer():
            while size <= limit:
                chunk = await self.response.content.readany()
                if not chunk:
                    self.release()
                    return b"".join(read)
                read.append(chunk)
                size += len(chunk)
        self.pending = read
        return None

    async def body(self, *, stop_at_limit: bool = False) -> AsyncIterator[bytes]:
        """The body in chunks, decoded.

        Raises :class:`ProxyError` past ``max_bytes`` (decoded, or a body of unknown length; a
        declared one was refused before), or with ``stop_at_limit`` ends there and sets
        ``over_limit``; and raises when the upstream breaks off or runs out of time half-way, or
        its compressed body is corrupt or cut short.
        """
        received = 0
        try:
            with _reading_the_answer():
                async for chunk in self._decoded():
                    received += len(chunk)
                    if received > self.max_bytes:
                        if not stop_at_limit:
                            raise ProxyError(
                                "response_too_large",
                                f"the upstream response exceeds {self.max_bytes} bytes",
                            )
                        self.over_limit = True
                        yield chunk[: len(chunk) - (received - self.max_bytes)]
                        return
                    yield chunk
        finally:
            self.release()

    async def _decoded(self) -> AsyncIterator[bytes]:
        chunks = self.response.content.iter_chunked(_CHUNK)
        if not self.codings:
            for chunk in self.pending:
                yield chunk
            async for chunk in chunks:
                yield chunk
            return
        decoder = content_coding.Decoder(self.codings)
        async for chunk in chunks:
            steps = decoder.feed(chunk)
            # One step of decoding per turn: a chunk may inflate to megabytes.
            while True:
                if self.pace is not None:
                    await self.pace()
                piece = next(steps, None)
                if piece is None:
                    break
                yield piece
        decoder.end()

    def release(self) -> None:
        """Gives the connection back to the pool, or closes it when the body was not read."""
        self.response.release()


@dataclass(slots=True)
class UpstreamRequest:
    """One request to send upstream, its credential in: what :meth:`Forwarder.send` is given."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    timeout_seconds: float
    max_response_bytes: int
    body: RequestBody = NO_BODY
    # A connection test's: the answer as it is (a redirect, a body over the limit), not refused.
    as_answered: bool = False
    decode: bool = False  # identity was asked for: a compressed answer is decoded
    pace: Callable[[], Awaitable[None]] | None = None
    # The connection's own TLS (a client certificate, its CAs); None: the session's.
    tls: ConnectionTls | None = None


def _untrusted(error: aiohttp.ClientConnectorCertificateError) -> ProxyError:
    """The vendor's certificate did not verify: OpenSSL's reason says whether it is not trusted
    or does not name the host (about the vendor's certificate: nothing secret)."""
    certificate_error = error.certificate_error
    reason = getattr(certificate_error, "verify_message", "") or "certificate verify failed"
    return ProxyError(
        "upstream_certificate_untrusted",
        f"the upstream's TLS certificate is not trusted or does not name its host: {reason[:200]}",
    )


# How a server that sends no alert ends a handshake it refuses (Python's asyncio servers).
_ENDED = (ssl.SSLError, ConnectionResetError)
# The alerts a server refuses a client certificate with (or the lack of one: a TLS 1.2 server
# says "handshake failure"), as OpenSSL names them in its message.
_ALERT = re.compile(
    r"\] ((?:sslv3|tlsv1|tlsv13) alert "
    r"(?:[a-z ]{0,20}certificate[a-z ]{0,20}|unknown ca|access denied|handshake failure)) \("
)


def _vendor_alert(error: BaseException) -> str:
    """The TLS alert the vendor sent to end the handshake ("tlsv13 alert certificate required",
    "tlsv1 alert unknown ca"), read from OpenSSL's message, or "" if it sent none: in TLS 1.3 a
    server refuses a client certificate after the handshake, so aiohttp raises it on reading."""
    if isinstance(error, aiohttp.ClientConnectorError):
        error = error.os_error
    message = error.args[1] if len(error.args) > 1 and isinstance(error.args[1], str) else ""
    found = _ALERT.search(message)
    return found.group(1) if found else ""


def _refused(tls: ConnectionTls | None, alert: str = "") -> ProxyError:
    """The vendor ended the TLS connection without answering, as a server refusing a client
    certificate does: with an alert, or (a server that sends none) by closing it."""
    if tls is not None and tls.client_certificate:
        why = "it does not accept the connection's client certificate"
    else:
        why = "it requires a client certificate, and the connection has none"
    how = f"with the alert {alert!r}" if alert else "without answering"
    return ProxyError(
        "client_certificate_refused",
        f"the upstream ended the TLS connection {how}, as when {why}",
    )


class Forwarder:
    def __init__(self, policy: NetworkPolicy, allow_http: bool) -> None:
        self.policy = policy
        self.allow_http = allow_http

    async def send(self, session: aiohttp.ClientSession, request: UpstreamRequest) -> Upstream:
        """The upstream's answer. Interim statuses are refused, and so are redirects and bodies
        declared over ``max_response_bytes``, unless ``as_answered`` (a connection test, which
        shows what an app's fetch would be refused): then the answer is returned as it is, the
        redirect never followed. With ``decode`` (identity was asked for) a compressed body is
        decoded, or refused if it cannot be; ``pace`` is awaited before each step of that."""
        method, url, headers, body = request.method, request.url, request.headers, request.body
        timeout_seconds = request.timeout_seconds
        max_response_bytes = request.max_response_bytes
        target = URL(url, encoded=True)
        size = body.size
        if size:
            # Declared, so a streamed body is not sent chunked: upstreams that refuse chunked
            # requests get the length they expect.
            headers = [*headers, ("Content-Length", str(size))]
        if target.scheme != "https" and not self.allow_http:
            raise ProxyError("blocked_address", "this installation only calls https upstreams")
        try:
            self.policy.check_address(target.raw_host or "")
            response = await session.request(
                method,
                target,
                headers=headers,
                data=body.stream() if size else None,
                allow_redirects=False,
                timeout=_timeout(timeout_seconds),
                ssl=True if request.tls is None else request.tls.context,
            )
        except BlockedAddressError:
            raise ProxyError("blocked_address", "the upstream address is not allowed") from None
        except aiohttp.ClientConnectorCertificateError as error:
            raise _untrusted(error) from None
        except aiohttp.ClientConnectorError as error:
            if isinstance(error.os_error, BlockedAddressError):
                raise ProxyError(
                    "blocked_address",
                    "the upstream host resolves to an address that is not allowed",
                ) from None
            alert = _vendor_alert(error)
            if alert or (request.tls is not None and isinstance(error.os_error, _ENDED)):
                raise _refused(request.tls, alert) from None
            raise ProxyError("upstream_failed", "the upstream could not be reached") from None
        except aiohttp.ServerDisconnectedError:
            if request.tls is not None:
                raise _refused(request.tls) from None
            raise ProxyError("upstream_failed", "the upstream request failed") from None
        except aiohttp.ClientOSError as error:
            alert = _vendor_alert(error)
            if alert:
                raise _refused(request.tls, alert) from None
            raise ProxyError("upstream_failed", "the upstream request failed") from None
        except TimeoutError:
            raise ProxyError(
                "upstream_timeout", f"the upstream did not answer within {timeout_seconds:g}s"
            ) from None
        except (aiohttp.ClientError, OSError):
            raise ProxyError("upstream_failed", "the upstream request failed") from None

        if response.status < 200:
            response.close()
            raise ProxyError(
                "upstream_informational",
                f"the upstream answered {response.status}, an interim status, as its final "
                "answer: nothing was upgraded, and the answer is refused",
            )
        if not request.as_answered:
            if is_redirect(response.status):
                response.close()
                raise ProxyError(
                    "upstream_redirect", "the upstream answered with a redirect, which is refused"
                )
            declared = response.content_length
            if declared is not None and declared > max_response_bytes:
                response.close()
                raise ProxyError(
                    "response_too_large",
                    f"the upstream response exceeds {max_response_bytes} bytes",
                )
        applied = content_coding.codings(response.headers.items()) if request.decode else ()
        if applied and not _bodiless(method, response.status):
            try:
                content_coding.check(applied)
            except ProxyError:
                response.close()
                raise
        return Upstream(response, max_response_bytes, applied, request.pace)
