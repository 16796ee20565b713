"""A connection's own TLS to its vendor (ConnectionRoute.tls), through a real proxy to a real TLS
upstream on 127.0.0.1 that requires a client certificate from a test CA, its own certificate
signed by that private CA: accepted with the right certificate and CA, refused without a client
certificate or with another CA's, refused when the vendor's certificate is not trusted or does not
name the host; a certificate rotated under load fails no fetch. No key material in a log line or
an answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from cryptography import x509

from gatehouse_contract.connection_tests import Answered, ProxyRefused, ReplicaTestRequest
from gatehouse_contract.routes import ConnectionRoute, Credential, UpstreamTls
from gatehouse_dev.pki import CertificateAuthority, KeyPair
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.limits.tenancy import TenantLimits
from gatehouse_proxy.upstream import connection_tls
from gatehouse_proxy.upstream.connection_tls import ConnectionContexts
from tests.proxy.serving import KEYRING, LIMITS, Tenant, running_proxy, table, upstream


@dataclass(frozen=True)
class Pki:
    vendor_ca: CertificateAuthority  # signs the vendor's certificate and the clients it accepts
    other_ca: CertificateAuthority
    directory: Path

    def pem(self, pair: KeyPair) -> bytes:
        return pair.cert_path.read_bytes() + pair.key_path.read_bytes()

    def client(self, name: str, ca: CertificateAuthority | None = None) -> KeyPair:
        return (ca or self.vendor_ca).issue(name, name, client=True)

    def vendor_tls(self, *hosts: str) -> ssl.SSLContext:
        """The vendor's side: its certificate for ``hosts``, a client certificate required."""
        pair = self.vendor_ca.issue("vendor-" + "-".join(hosts), "vendor", hosts=hosts)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(pair.cert_path, pair.key_path)
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(self.vendor_ca.cert_path))
        return context

    @property
    def bundle(self) -> str:
        return self.vendor_ca.cert_path.read_text()


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    for name in ("vendor", "other"):
        (tmp_path / name).mkdir()
    return Pki(
        CertificateAuthority(tmp_path / "vendor", "a-vendors-private-ca"),
        CertificateAuthority(tmp_path / "other", "another-ca"),
        tmp_path,
    )


def _serial(pair: KeyPair) -> str:
    return str(x509.load_pem_x509_certificate(pair.cert_path.read_bytes()).serial_number)


@dataclass
class Arrivals:
    """The requests that reached the vendor: ``reached`` is set at ``count`` of them."""

    count: int
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    seen: int = 0

    def note(self) -> None:
        self.seen += 1
        if self.seen >= self.count:
            self.reached.set()


def _vendor(wait_seconds: float = 0.0, arrivals: Arrivals | None = None) -> web.Application:
    """Answers with the serial of the client certificate presented."""

    async def who(request: web.Request) -> web.Response:
        assert request.transport is not None
        der = request.transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
        serial = str(x509.load_der_x509_certificate(der).serial_number)
        if arrivals is not None:
            arrivals.note()
        await asyncio.sleep(wait_seconds)
        return web.json_response({"serial": serial})

    app = web.Application()
    app.router.add_get("/who", who)
    return app


async def _fetch(client: httpx.AsyncClient, url: str, tenant: Tenant) -> tuple[int, dict[str, str]]:
    said = await client.get(
        f"{url}/v1/fetch/api/who", headers={"Authorization": f"Bearer {tenant.token}"}
    )
    body = said.json()
    return said.status_code, body.get("error") or body


def _no_key_material(pki: Pki, logged: list[logging.LogRecord], answers: str) -> None:
    keys = [path.read_text() for path in pki.directory.rglob("*.key")]
    # Each key's base64 lines (not its armour, which names nothing).
    lines = [line for key in keys for line in key.splitlines() if "-----" not in line]
    text = answers + "\n".join(record.getMessage() for record in logged)
    assert "PRIVATE KEY" not in text
    assert lines
    assert not [line for line in lines if line in text]


def test_the_vendor_is_called_with_the_connections_certificate_and_cas(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    good = pki.client("app-client")
    foreign = pki.client("foreign-client", pki.other_ca)
    other = pki.client("other-client")
    mismatched = pki.pem(good).split(b"-----BEGIN PRIVATE KEY")[0] + other.key_path.read_bytes()
    with_ca = UpstreamTls(ca_bundle=pki.bundle)

    async def scenario() -> dict[str, tuple[int, dict[str, str]]]:
        async with (
            upstream(_vendor(), pki.vendor_tls("127.0.0.1")) as origin,
            upstream(_vendor(), pki.vendor_tls("vendor.test")) as misnamed,
        ):
            tenants = [
                Tenant("good", origin, tls=with_ca, client_certificate=pki.pem(good)),
                Tenant(
                    "private-roots-only",
                    origin,
                    tls=UpstreamTls(ca_bundle=pki.bundle, system_roots=False),
                    client_certificate=pki.pem(good),
                ),
                Tenant("no-certificate", origin, tls=with_ca),
                Tenant("foreign", origin, tls=with_ca, client_certificate=pki.pem(foreign)),
                Tenant("system-roots", origin, tls=UpstreamTls(), client_certificate=pki.pem(good)),
                Tenant("misnamed", misnamed, tls=with_ca, client_certificate=pki.pem(good)),
                Tenant("mismatched", origin, tls=with_ca, client_certificate=mismatched),
            ]
            async with (
                running_proxy(tmp_path, tenants) as running,
                httpx.AsyncClient(timeout=30) as client,
            ):
                said = {t.namespace: await _fetch(client, running.url, t) for t in tenants}
                # A connection test takes the same way, and so does a draft's (not routed yet).
                for name, draft in (("good", None), ("draft", tenants[0].connection())):
                    tested = await running.proxy.run_test(
                        ReplicaTestRequest(
                            connection="good/api", method="GET", path="/who", draft=draft
                        ),
                        lambda: None,
                    )
                    assert isinstance(tested, Answered)
                    said[f"test of {name}"] = (
                        tested.answered.status_code,
                        json.loads(tested.answered.body),
                    )
                refused = await running.proxy.run_test(
                    ReplicaTestRequest(connection="foreign/api", method="GET", path="/who"),
                    lambda: None,
                )
                assert isinstance(refused, ProxyRefused)
                said["test of foreign"] = (502, {"code": refused.refused.code})
                return said

    with caplog.at_level(logging.DEBUG):
        said = asyncio.run(scenario())
    assert said["good"] == (200, {"serial": _serial(good)})
    assert said["private-roots-only"] == (200, {"serial": _serial(good)})
    assert said["test of good"] == said["test of draft"] == (200, {"serial": _serial(good)})
    assert said["test of foreign"] == (502, {"code": "client_certificate_refused"})
    codes = {name: (status, answer.get("code")) for name, (status, answer) in said.items()}
    assert codes["no-certificate"] == (502, "client_certificate_refused")
    assert "requires a client certificate" in said["no-certificate"][1]["message"]
    assert codes["foreign"] == (502, "client_certificate_refused")
    assert "does not accept the connection's client certificate" in said["foreign"][1]["message"]
    # The vendor's private CA is in no system store.
    assert codes["system-roots"] == (502, "upstream_certificate_untrusted")
    assert codes["misnamed"] == (502, "upstream_certificate_untrusted")
    assert "mismatch" in said["misnamed"][1]["message"]
    assert codes["mismatched"] == (503, "connection_unavailable")
    _no_key_material(pki, caplog.records, json.dumps(said))
    assert not [name for name in os.listdir("/dev/shm") if name.startswith("gatehouse-tls-")]


@contextlib.contextmanager
def _blocking_vendor(tls: ssl.SSLContext) -> Iterator[str]:
    """A vendor on OpenSSL's blocking sockets, as most servers are (nginx, Go's, OpenSSL's own):
    a handshake it refuses ends with an alert, which asyncio's servers never send. One request
    per connection, answered 200."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stopped = threading.Event()

    def serve() -> None:
        while not stopped.is_set():
            try:
                accepted, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.settimeout(5)
            served = tls.wrap_socket(accepted, server_side=True, do_handshake_on_connect=False)
            try:
                served.do_handshake()
                served.recv(65536)
                served.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 2\r\nConnection: close\r\n\r\n{}"
                )
                served.close()
            except OSError:  # the handshake refused (ssl.SSLError), or the client gone
                _linger(socket.socket(fileno=served.detach()))

    thread = threading.Thread(target=serve, name="blocking-vendor")
    thread.start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopped.set()
        thread.join()
        listener.close()


def _linger(refused: socket.socket) -> None:
    """Closes as servers do (nginx's lingering close): the request the client sent meanwhile read
    and dropped, so that the kernel does not reset the connection before the client reads the
    alert."""
    with contextlib.suppress(OSError), refused:
        refused.shutdown(socket.SHUT_WR)
        while refused.recv(65536):
            pass


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2])
def test_a_vendors_alert_says_it_refused_the_client_certificate(
    tmp_path: Path, pki: Pki, version: ssl.TLSVersion
) -> None:
    """In TLS 1.3 the vendor refuses a client certificate after the handshake (its alert is read
    with the answer); in TLS 1.2, during it: the same refusal, naming the alert."""
    vendor = pki.vendor_tls("127.0.0.1")
    vendor.maximum_version = version
    with_ca = UpstreamTls(ca_bundle=pki.bundle)
    foreign = pki.client("foreign-client", pki.other_ca)

    async def scenario(origin: str) -> dict[str, tuple[int, dict[str, str]]]:
        tenants = [
            Tenant("good", origin, tls=with_ca, client_certificate=pki.pem(pki.client("good"))),
            Tenant("no-certificate", origin, tls=with_ca),
            Tenant("foreign", origin, tls=with_ca, client_certificate=pki.pem(foreign)),
        ]
        async with (
            running_proxy(tmp_path, tenants) as running,
            httpx.AsyncClient(timeout=30) as client,
        ):
            return {t.namespace: await _fetch(client, running.url, t) for t in tenants}

    with _blocking_vendor(vendor) as origin:
        said = asyncio.run(scenario(origin))
    assert said["good"] == (200, {})
    for name, alert in (("no-certificate", "certificate required"), ("foreign", "unknown ca")):
        status, error = said[name]
        assert (status, error["code"]) == (502, "client_certificate_refused")
        if version is ssl.TLSVersion.TLSv1_3:
            assert alert in error["message"]
        else:  # OpenSSL's TLS 1.2 server says "handshake failure" for a missing certificate
            assert "alert" in error["message"]


def test_a_certificate_rotated_under_load_fails_no_fetch(
    tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    """200 fetches in flight while the table swaps in another client certificate: none fails,
    those in flight finish on the old certificate's connections, and later ones present the
    new."""
    old, new = pki.client("old-client"), pki.client("new-client")
    in_flight = 200

    async def scenario() -> tuple[list[tuple[int, dict[str, str]]], set[str]]:
        # Half of them at the vendor, the other half on their way, when the table swaps.
        arrivals = Arrivals(in_flight // 2)
        vendor = _vendor(wait_seconds=0.5, arrivals=arrivals)
        async with upstream(vendor, pki.vendor_tls("127.0.0.1")) as origin:
            tls = UpstreamTls(ca_bundle=pki.bundle)
            before = Tenant("rotating", origin, tls=tls, client_certificate=pki.pem(old))
            after = Tenant("rotating", origin, tls=tls, client_certificate=pki.pem(new))
            limits = TenantLimits(concurrent_per_app=in_flight, concurrent_per_connection=in_flight)
            async with (
                running_proxy(tmp_path, [before], limits) as running,
                httpx.AsyncClient(
                    timeout=30, limits=httpx.Limits(max_connections=in_flight)
                ) as client,
            ):
                fetches = [
                    asyncio.create_task(_fetch(client, running.url, before))
                    for _ in range(in_flight)
                ]
                await asyncio.wait_for(arrivals.reached.wait(), 20)
                running.proxy.store.install(table([after], version=2))
                said = await asyncio.gather(*fetches)
                later = {(await _fetch(client, running.url, after))[1]["serial"] for _ in range(5)}
                return said, later

    with caplog.at_level(logging.DEBUG):
        said, later = asyncio.run(scenario())
    failed = [answer for status, answer in said if status != 200]
    assert not failed, failed[:3]
    assert {answer["serial"] for _, answer in said} <= {_serial(old), _serial(new)}
    presented = [answer["serial"] for _, answer in said]
    assert presented.count(_serial(old)) >= in_flight // 2
    assert later == {_serial(new)}
    _no_key_material(pki, caplog.records, json.dumps(said))


def test_a_connections_context_is_made_once_for_its_requests_and_dropped_with_it(
    pki: Pki,
) -> None:
    """Concurrent first requests share one making (one decryption); a rotated certificate is
    another context; the table no longer routing the connection drops it; a key that cannot be
    decrypted is tried again, and named by nothing secret."""
    origin = "https://vendor.test"
    revealed: list[str] = []
    pems = {"old": pki.pem(pki.client("old")), "new": pki.pem(pki.client("new"))}

    def connection(which: str) -> ConnectionRoute:
        encrypted = KEYRING.encrypt(pems[which], UpstreamTls.context("uid-1", origin))
        return ConnectionRoute(
            key="ns/api",
            uid="uid-1",
            origin=origin,
            allowed_methods=frozenset({"GET"}),
            allowed_paths=("/",),
            credential=Credential(type="none"),
            limits=LIMITS,
            tls=UpstreamTls(client_certificate=encrypted, ca_bundle=pki.bundle),
        )

    def reveal(route: ConnectionRoute) -> bytes:
        assert route.tls is not None
        assert route.tls.client_certificate is not None
        revealed.append(route.uid)
        if route.key == "ns/locked":
            raise ProxyError("connection_unavailable", "cannot be decrypted here")
        return KEYRING.decrypt(
            route.tls.client_certificate, UpstreamTls.context(route.uid, route.origin)
        )

    async def scenario() -> None:
        contexts = ConnectionContexts(reveal, None)
        old = connection("old")
        made = await asyncio.gather(*(contexts.context(old) for _ in range(20)))
        assert len({id(tls) for tls in made}) == 1
        assert revealed == ["uid-1"]
        assert made[0] is not None
        assert made[0].client_certificate
        # The same settings in the next table: the same context.
        again = old.model_copy()
        assert await contexts.context(again) is made[0]
        new = connection("new")
        assert await contexts.context(new) is not made[0]
        assert len(revealed) == 2
        contexts.keep({})
        assert await contexts.context(new) is not None
        assert len(revealed) == 3
        locked = new.model_copy(update={"key": "ns/locked"})
        contexts.keep({})
        for _ in range(2):
            with pytest.raises(ProxyError) as refused:
                await contexts.context(locked)
            assert refused.value.code == "connection_unavailable"
        assert len(revealed) == 5  # not kept: tried again

    asyncio.run(scenario())


def test_the_key_is_written_only_encrypted_and_only_for_a_moment(
    pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the file the chain is loaded from holds: the chain, and the key encrypted with a
    password used once; the file is gone once the context is made. Without a place to write it,
    the connection is unavailable, never a 500."""
    pair = pki.client("written")
    written: list[tuple[str, bytes]] = []
    private_file = connection_tls._private_file

    @contextlib.contextmanager
    def recorded(content: bytes) -> Iterator[str]:
        with private_file(content) as path:
            written.append((path, Path(path).read_bytes()))
            yield path

    monkeypatch.setattr(connection_tls, "_private_file", recorded)
    made = connection_tls.make(UpstreamTls(system_roots=False), pki.pem(pair), None)
    assert made.client_certificate
    [(path, content)] = written
    assert not Path(path).exists()
    assert b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in content
    key_lines = [line for line in pair.key_path.read_bytes().splitlines() if b"-----" not in line]
    assert not [line for line in key_lines if line in content]
    assert pair.cert_path.read_bytes().strip() in content

    monkeypatch.setattr(connection_tls, "_private_file", private_file)
    monkeypatch.setattr(connection_tls, "_TMPFS", str(pki.directory / "absent"))
    monkeypatch.setattr(tempfile, "tempdir", str(pki.directory / "absent"))
    with pytest.raises(ProxyError) as refused:
        connection_tls.make(UpstreamTls(system_roots=False), pki.pem(pair), None)
    assert refused.value.code == "connection_unavailable"
    assert "temporary directory" in refused.value.message


def test_one_namespaces_connections_hold_a_bounded_number_of_contexts(pki: Pki) -> None:
    """A context holds its own copy of the trust store (about 0.9 MB with the system's roots), in
    every worker, for as long as the table routes its connection: a namespace's thousands of
    connections with spec.tls (each one fetched once) would otherwise take gigabytes from every
    tenant's worker. Each namespace keeps its most recently used few; another's are untouched."""
    limit = connection_tls.MAX_CONTEXTS_PER_NAMESPACE
    made: list[str] = []

    def route(namespace: str, index: int) -> ConnectionRoute:
        return ConnectionRoute(
            key=f"{namespace}/api-{index}",
            uid=f"{namespace}-{index}",
            origin="https://vendor.test",
            allowed_methods=frozenset({"GET"}),
            allowed_paths=("/",),
            credential=Credential(type="none"),
            limits=LIMITS,
            tls=UpstreamTls(ca_bundle=pki.bundle, system_roots=False),
        )

    def counted(tls: UpstreamTls, certificate: bytes | None, ca_file: str | None) -> Any:
        made.append("one")
        return object()

    async def scenario() -> None:
        contexts = ConnectionContexts(lambda _: b"", None)
        other = await contexts.context(route("other", 0))
        first = await contexts.context(route("busy", 0))
        for index in range(1, limit + 5):
            await contexts.context(route("busy", index))
        assert len(made) == limit + 6
        assert await contexts.context(route("other", 0)) is other  # untouched
        assert await contexts.context(route("busy", limit + 4)) is not None
        assert len(made) == limit + 6  # a recent one is kept
        assert await contexts.context(route("busy", 0)) is not first  # the oldest was dropped
        assert len(made) == limit + 7

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(connection_tls, "make", counted)
        asyncio.run(scenario())
