"""A connection's own TLS toward its vendor (``ConnectionRoute.tls``): the CAs the vendor's
certificate may chain to, and the client certificate the proxy presents, as one
``ssl.SSLContext`` per connection and settings.

A context costs tens of milliseconds of CPU (the system's trust store), so it is made off the
event loop, once for all the requests of a connection's settings (the first requests wait for one
making), and dropped when the table no longer routes them, or when its namespace's connections
hold more than their share (MAX_CONTEXTS_PER_NAMESPACE, the least recently used first). aiohttp
keys its pooled connections by the context: a rotated certificate's new context opens new
connections, while requests in flight finish on the old ones.

The client certificate's private key is never written to disk in the clear: the standard library
loads a certificate chain only from a file, so the key is re-encrypted in memory with a one-time
random password, written with its chain to a file only this process's user reads (in a tmpfs
where there is one), loaded with that password, and the file removed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization

from gatehouse_contract.routes import ConnectionRoute, UpstreamTls, namespace_of
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.upstream.forwarder import ConnectionTls, tls_context

# The client certificate's chain and private key in PEM, in the clear (decrypted with the
# keyring): what the composition root gives, for the credentials room decrypts.
Reveal = Callable[[ConnectionRoute], bytes]

# RAM-backed where the system has one: the encrypted key's file never reaches a disk. A shared
# directory, but mkstemp makes a new file of a random name only its owner reads.
_TMPFS = "/dev/shm"  # noqa: S108
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n.*?-----END \1-----", re.DOTALL)
# The contexts one namespace's connections keep in a worker, the most recently used: each holds
# its own trust store (about 0.9 MB with the system's roots), so a namespace's thousands of
# connections with spec.tls would otherwise take gigabytes of every tenant's worker. One dropped
# is made again when next used (tens of milliseconds, in a thread).
MAX_CONTEXTS_PER_NAMESPACE = 64


def make(tls: UpstreamTls, certificate: bytes | None, ca_file: str | None) -> ConnectionTls:
    """The context for ``tls`` (blocking: called in a thread). ``certificate``: the client
    certificate's chain and key in PEM; ``ca_file``: the installation's CAs, added to the
    system's roots where those apply. Raises :class:`ProxyError` naming nothing secret."""
    context = tls_context(ca_file) if tls.system_roots else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # Whatever the settings: the vendor's certificate verified, and its host name.
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    if certificate is not None:
        _load_client_certificate(context, certificate)
    if tls.ca_bundle:
        try:
            context.load_verify_locations(cadata=tls.ca_bundle)
        except (ssl.SSLError, ValueError):
            raise ProxyError(
                "connection_unavailable", "the connection's CA bundle holds no PEM certificate"
            ) from None
    return ConnectionTls(context, client_certificate=certificate is not None)


def _load_client_certificate(context: ssl.SSLContext, pem: bytes) -> None:
    blocks = [(match.group(1), match.group(0)) for match in _PEM_BLOCK.finditer(pem)]
    chain = [block for label, block in blocks if label == b"CERTIFICATE"]
    keys = [block for label, block in blocks if label.endswith(b"PRIVATE KEY")]
    if not chain or len(keys) != 1:
        raise ProxyError(
            "connection_unavailable",
            "the connection's client certificate is not a PEM certificate chain and one "
            "private key",
        )
    password = secrets.token_bytes(32)
    try:
        key = serialization.load_pem_private_key(keys[0], password=None)
        encrypted = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password),
        )
    except (ValueError, TypeError):
        raise ProxyError(
            "connection_unavailable",
            "the connection's client certificate has a private key that cannot be read "
            "(encrypted, or of a kind TLS does not use)",
        ) from None
    try:
        with _private_file(b"\n".join([*chain, encrypted])) as path:
            context.load_cert_chain(path, password=password)
    except ssl.SSLError:
        raise ProxyError(
            "connection_unavailable",
            "the connection's client certificate cannot be loaded (its key does not match "
            "its certificate, or the certificate is not one TLS reads)",
        ) from None
    except OSError:
        raise ProxyError(
            "connection_unavailable",
            "the connection's client certificate cannot be loaded: the proxy has no writable "
            "temporary directory (/dev/shm, or TMPDIR)",
        ) from None


@contextlib.contextmanager
def _private_file(content: bytes) -> Iterator[str]:
    """``content`` in a file only this user reads (mkstemp's 0600), removed on the way out."""
    directory = _TMPFS if os.access(_TMPFS, os.W_OK) else None
    descriptor, path = tempfile.mkstemp(prefix="gatehouse-tls-", dir=directory)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(content)
        yield path
    finally:
        os.unlink(path)


@dataclass
class _Made:
    """One connection's context, being made or made, and the settings it is for."""

    fingerprint: str
    tls: UpstreamTls  # the table's object last seen: the same one needs no new fingerprint
    making: asyncio.Task[ConnectionTls]
    namespace: str


class ConnectionContexts:
    """Each routed connection's TLS context, made once per settings (connection uid, and
    ``UpstreamTls.fingerprint``: a rotated certificate is another) for every request."""

    def __init__(self, reveal: Reveal, ca_file: str | None) -> None:
        self._reveal = reveal
        self._ca_file = ca_file
        self._made: dict[str, _Made] = {}
        # Per namespace, the uids of its contexts, the least recently used first.
        self._recent: dict[str, dict[str, None]] = {}

    async def context(
        self, connection: ConnectionRoute, *, keep: bool = True
    ) -> ConnectionTls | None:
        """The connection's context, None for the defaults (no ``tls``). ``keep=False`` (a
        draft's test): made for this call alone, not kept."""
        tls = connection.tls
        if tls is None:
            return None
        if not keep:
            return await self._making(connection, tls)
        uid = connection.uid
        made = self._made.get(uid)
        if made is None or (made.tls is not tls and made.fingerprint != tls.fingerprint):
            making = asyncio.ensure_future(self._making(connection, tls))
            made = _Made(tls.fingerprint, tls, making, namespace_of(connection.key))
            made.making.add_done_callback(functools.partial(self._made_one, uid, made))
            self._made[uid] = made
        made.tls = tls
        self._used(uid, made.namespace)
        # Shielded: a request that goes away leaves the making to the others.
        return await asyncio.shield(made.making)

    async def _making(self, connection: ConnectionRoute, tls: UpstreamTls) -> ConnectionTls:
        certificate = None
        if tls.client_certificate is not None:
            try:
                certificate = self._reveal(connection)
            except ProxyError as error:
                raise _Unrevealed(error.code, error.message) from None
        return await asyncio.to_thread(make, tls, certificate, self._ca_file)

    def _made_one(self, uid: str, made: _Made, making: asyncio.Task[ConnectionTls]) -> None:
        """A key that could not be decrypted here may be later (a keyring key added since): such
        a making is not kept. Any other failure is the settings' own, kept till they change."""
        failure = None if making.cancelled() else making.exception()
        if (making.cancelled() or isinstance(failure, _Unrevealed)) and self._made.get(uid) is made:
            self._drop(uid)

    def _used(self, uid: str, namespace: str) -> None:
        """``uid``'s context is its namespace's most recently used; the least recently used
        beyond the namespace's share is dropped (requests that hold it finish with it)."""
        recent = self._recent.setdefault(namespace, {})
        recent.pop(uid, None)
        recent[uid] = None
        while len(recent) > MAX_CONTEXTS_PER_NAMESPACE:
            oldest = next(iter(recent))
            del recent[oldest]
            self._made.pop(oldest, None)

    def _drop(self, uid: str) -> None:
        made = self._made.pop(uid, None)
        recent = self._recent.get(made.namespace, {}) if made is not None else {}
        recent.pop(uid, None)
        if made is not None and not recent:
            self._recent.pop(made.namespace, None)

    def keep(self, routed: Mapping[str, UpstreamTls]) -> None:
        """The table now routes these connections' settings (by uid): the others' contexts are
        dropped (their pooled connections close with their pools, or time out)."""
        for uid in [uid for uid, made in self._made.items() if uid not in routed]:
            self._drop(uid)
        for uid, tls in routed.items():
            made = self._made.get(uid)
            if made is not None and made.fingerprint != tls.fingerprint:
                self._drop(uid)


class _Unrevealed(ProxyError):
    """The client certificate could not be decrypted here: tried again by the next request."""
