"""The admission webhook's server: kopf's, with its certificate made by ``cryptography``, and
client authentication of the API server.

The installer owns the ValidatingWebhookConfiguration (see
``controllers.webhook_configuration``); the server hands the CA bundle of the certificate made
here at every start to ``on_ca_bundle``, which writes it there. In a cluster the API server
reaches the operator through its Service; on a developer's machine, at the address it listens
on.

The checks answer questions about any namespace for whichever user a review names (does this
connection exist, may this user read that Secret), so a review is only as trustworthy as its
sender. With a client CA, the server demands a certificate that CA signed (the one the API
server presents, named in its AdmissionConfiguration) in the TLS handshake, as OPA Gatekeeper's
``--client-ca-name`` does, and with client names accepts only those subjects (its
``--client-cn-name``): a caller without one learns nothing, not even how a review is answered.
Where that CA comes from (the chart's default: one the webhook makes) and how a refused caller
is said in the log: ``access.webhook_clients``.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import aiohttp.web
import kopf
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gatehouse_operator.access.webhook_clients import TLS_CERT, TLS_KEY, client_authentication
from gatehouse_operator.kube import Kube

# The certificate is made once (per process, or once for all replicas in a Secret) and never
# renewed: it must outlive them. Delete the Secret and restart the webhook Pods to replace it.
CERTIFICATE_DAYS = 3650
log = logging.getLogger("gatehouse.webhook")


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def common_names(peer: Mapping[str, Any] | None) -> set[str]:
    """The subject common names of a verified peer certificate (``getpeercert()``'s form)."""
    return {
        value
        for attributes in (peer or {}).get("subject", ())
        for key, value in attributes
        if key == "commonName"
    }


class WebhookServer(kopf.WebhookServer):
    def __init__(
        self,
        *,
        on_ca_bundle: Callable[[str], Awaitable[None]],
        service: str = "",
        client_ca_file: Path | None = None,
        client_ca_source: str = "",
        client_names: Collection[str] = (),
        **kwargs: object,
    ) -> None:
        """``service`` is ``namespace/name`` of the Service in front of the operator, if any;
        ``on_ca_bundle`` receives each new certificate's CA bundle (base64 PEM);
        ``client_ca_file`` (PEM) makes callers present a certificate one of its CAs signed
        (``client_ca_source`` says, in the log of refused callers, where those CAs come from),
        and ``client_names`` (with it) the common names such a certificate may carry."""
        self.on_ca_bundle = on_ca_bundle
        self.service = tuple(service.split("/", 1)) if service else ()
        self.client_names = frozenset(client_names)
        if self.service:
            kwargs["host"], *kwargs["extra_sans"] = self.hostnames(service)
        if client_ca_file is not None:
            trusted = client_ca_source or f"signed by a CA in {client_ca_file}"
            kwargs["context"] = client_authentication(client_ca_file, trusted)
        super().__init__(**kwargs)  # type: ignore[arg-type]

    @staticmethod
    def hostnames(service: str) -> list[str]:
        """The names the API server may call the Service ``namespace/name`` by."""
        namespace, name = service.split("/", 1)
        return [f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]

    @staticmethod
    def build_certificate(
        hostnames: Collection[str], password: str | None = None
    ) -> tuple[bytes, bytes]:
        """A self-signed certificate for ``hostnames`` (its own CA bundle)."""
        names = [name for name in dict.fromkeys(hostnames) if name and name != "0.0.0.0"]  # noqa: S104
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
        start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(days=CERTIFICATE_DAYS))
            .add_extension(x509.SubjectAlternativeName([_san(name) for name in names]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256())
        )
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        return (
            certificate.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
            ),
        )

    def _named_callers_only(self, fn: kopf.WebhookFn) -> kopf.WebhookFn:
        """``fn``, for a caller whose certificate carries one of the client names; 403 (no
        check run, nothing of the review answered) for any other."""

        async def guarded(
            request: Any,
            *,
            webhook: str | None = None,
            headers: kopf.Headers | None = None,
            sslpeer: kopf.SSLPeer | None = None,
        ) -> Any:
            names = common_names(sslpeer)
            if not names & self.client_names:
                log.warning(
                    "refused an admission review from a client certificate for %s: the "
                    "webhook answers only %s",
                    ", ".join(sorted(names)) or "no name",
                    ", ".join(sorted(self.client_names)),
                )
                raise aiohttp.web.HTTPForbidden(
                    text="this client certificate's subject is not one the webhook answers"
                )
            return await fn(request, webhook=webhook, headers=headers, sslpeer=sslpeer)

        return guarded

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        if self.client_names:
            fn = self._named_callers_only(fn)
        async for config in super().__call__(fn):
            if self.service:
                namespace, name = self.service
                config = kopf.WebhookClientConfig(
                    service=kopf.WebhookClientConfigService(
                        namespace=namespace, name=name, port=self.port or 443, path=""
                    ),
                    caBundle=config["caBundle"],
                )
            await self.on_ca_bundle(config.get("caBundle") or "")
            yield config


async def shared_certificate(
    kube: Kube, ref: str, hostnames: Collection[str], configuration: str
) -> tuple[bytes, bytes]:
    """The certificate and key every webhook replica serves, from the Secret ``ref``
    ("namespace/name"), made by the first replica that finds it missing.

    One certificate for all replicas: the configuration has one CA bundle, and a replica serving
    a certificate of its own would fail every call the API server sent it. The Secret is owned
    by the webhook ``configuration`` (which the installer owns), so uninstalling removes both.
    """
    namespace, name = ref.split("/", 1)
    for _ in range(2):
        found = await kube.secrets.secret_data(namespace, name)
        if found and TLS_CERT in found and TLS_KEY in found:
            return found[TLS_CERT], found[TLS_KEY]
        certificate, key = WebhookServer.build_certificate(hostnames)
        if not await store_certificate(kube, ref, configuration, certificate, key):
            continue  # another replica made it first: serve theirs
        return certificate, key
    raise RuntimeError(f"the webhook certificate Secret {ref} holds no {TLS_CERT} and {TLS_KEY}")


async def store_certificate(
    kube: Kube, ref: str, configuration: str, certificate: bytes, key: bytes
) -> bool:
    """Creates the Secret ``ref`` with the certificate, owned by the webhook configuration;
    False when another replica made it first."""
    namespace, name = ref.split("/", 1)
    owner = await kube.resources.webhook_configuration_owner(configuration)
    pem = {TLS_CERT: certificate.decode(), TLS_KEY: key.decode()}
    return await kube.secrets.create_secret_if_absent(
        namespace, name, pem, type_="kubernetes.io/tls", owner=owner
    )
