"""Who may call the admission webhook: the API server's client certificate, as the webhook makes
it when the installer brings no CA of its own, and the callers its TLS handshake refuses, said
in its log.

The chart's default (``webhook.clientAuthentication`` on, without ``caBundle`` or
``existingSecret``): the first webhook replica to start makes a CA, signs one client
certificate with it for the API server (subject ``kube-apiserver``, for client authentication
only), keeps the three in the Secret it is given (``ca.crt``, ``tls.crt``, ``tls.key``) and
drops the CA's key: nothing can sign another caller, so the webhook trusts that one certificate
and no other. The render holds no key (a key drawn at render time would change at every GitOps
sync, and the API server's copy with it), as the webhook's serving certificate and the keyring
are made at a first start. The Secret has no owner, so ``helm uninstall`` keeps it: the API
server's configuration, set up on the control plane from it, holds across upgrades and
reinstalls. It is never renewed (CERTIFICATE_DAYS): delete it, restart the webhook Pods, and
give the API server the new one.

A refused handshake reaches no handler and asyncio logs none, so the server's TLS objects say
it here: what the caller presented (nothing, or a certificate the CA did not sign) and what to
do, at most once a minute with a count, whoever floods the port.
"""

from __future__ import annotations

import datetime
import logging
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gatehouse_operator.kube import Kube

# The keys of a kubernetes.io/tls Secret (the webhook's serving certificate's too), and its CA.
CA_CERT, TLS_CERT, TLS_KEY = "ca.crt", "tls.crt", "tls.key"
# The subject the API server's certificate carries, as kube-apiserver's own client
# certificates do; allowedNames may name it.
CLIENT_NAME = "kube-apiserver"
CERTIFICATE_DAYS = 3650
# At most one log line per kind of refusal in this many seconds; the others are counted in it.
REFUSALS_LOGGED_EVERY = 60.0
log = logging.getLogger("gatehouse.webhook")


@dataclass(frozen=True)
class ClientCertificate:
    """The CA the webhook trusts, and the one certificate (with its key) it signed."""

    ca: bytes
    certificate: bytes
    key: bytes


def build_client_certificate(common_name: str = CLIENT_NAME) -> ClientCertificate:
    """A new CA and a client certificate it signed for ``common_name``; the CA's key is not
    kept (it leaves with this function's frame)."""
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    end = start + datetime.timedelta(days=CERTIFICATE_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gatehouse-webhook-clients")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ClientCertificate(
        ca=ca.public_bytes(serialization.Encoding.PEM),
        certificate=certificate.public_bytes(serialization.Encoding.PEM),
        key=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


async def client_certificate_authority(kube: Kube, ref: str) -> bytes:
    """The CA (PEM) of the API server's client certificate in the Secret ``ref``
    ("namespace/name"), made by the first replica that finds the Secret missing."""
    namespace, name = ref.split("/", 1)
    for _ in range(2):
        found = await kube.secrets.secret_data(namespace, name)
        if found and found.get(CA_CERT) and found.get(TLS_CERT) and found.get(TLS_KEY):
            return found[CA_CERT]
        if found is not None:
            raise ValueError(
                f"the Secret {ref} holds no {CA_CERT}, {TLS_CERT} and {TLS_KEY}: delete it and "
                "restart the webhook to make a new one (then give the API server the new "
                "certificate)"
            )
        made = build_client_certificate()
        pem = {CA_CERT: made.ca.decode(), TLS_CERT: made.certificate.decode()}
        if await kube.secrets.create_secret_if_absent(
            namespace, name, {**pem, TLS_KEY: made.key.decode()}, type_="kubernetes.io/tls"
        ):
            log.warning(
                "made the API server's client certificate for the webhook, in Secret %s (%s, "
                "%s): until the API server presents it (its AdmissionConfiguration), every "
                'write the webhook checks is refused; see the docs, "Who may call the '
                'admission webhook"',
                ref,
                TLS_CERT,
                TLS_KEY,
            )
            return made.ca
        # Another replica made it first: trust theirs.
    raise RuntimeError(f"the Secret {ref} came and went while the webhook started")


class HandshakeRefusals:
    """Says in the log which callers the handshake refused, and what to do about it: the first
    of each kind at once, then at most one line every REFUSALS_LOGGED_EVERY seconds."""

    def __init__(self, trusted: str) -> None:
        self.trusted = trusted  # where the CA comes from, for the log
        self._last: dict[str, float] = {}
        self._unsaid: dict[str, int] = {}

    def note(self, error: ssl.SSLError) -> None:
        if isinstance(error, ssl.SSLCertVerificationError):
            kind = "presented a client certificate the webhook's CA did not sign"
            detail = f" ({error.verify_message})"
        elif error.reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            kind, detail = "presented no client certificate", ""
        else:
            return  # not about who calls: a plain HTTP request, no common cipher...
        now = time.monotonic()
        if now - self._last.get(kind, -REFUSALS_LOGGED_EVERY) < REFUSALS_LOGGED_EVERY:
            self._unsaid[kind] = self._unsaid.get(kind, 0) + 1
            return
        self._last[kind] = now
        unsaid = self._unsaid.pop(kind, 0)
        log.warning(
            "refused a caller in the TLS handshake: it %s%s%s. The webhook answers only the API "
            "server presenting a certificate %s. If creates and updates of "
            "ExternalConnections, DataApps, ChartTypes, ProjectConfigs and ConnectionTests fail "
            "with 'failed calling webhook ...: EOF', the API server presents none: point its "
            "AdmissionConfiguration at that certificate, or turn client authentication off "
            'and accept what the port then tells anyone (the docs, "Who may call the admission '
            'webhook")',
            kind,
            detail,
            f" ({unsaid} more since the last such line)" if unsaid else "",
            self.trusted,
        )


class _CallerContext(ssl.SSLContext):
    """The server's TLS context, with where its refusals are said."""

    refusals: HandshakeRefusals


class _CallerObject(ssl.SSLObject):
    """A connection's TLS, as asyncio drives it: a refused handshake is noted before it is
    raised (asyncio then drops the connection without a word)."""

    def do_handshake(self) -> None:
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as error:
            cast(_CallerContext, self.context).refusals.note(error)
            raise


def client_authentication(ca_file: Path, trusted: str) -> ssl.SSLContext:
    """The server's TLS context when callers must authenticate: a handshake without a client
    certificate signed by one of ``ca_file``'s CAs fails (only those CAs, never the system's),
    and is said in the log (``trusted``: where those CAs come from, in its words)."""
    context = _CallerContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_verify_locations(cafile=str(ca_file))
    context.verify_mode = ssl.CERT_REQUIRED
    context.refusals = HandshakeRefusals(trusted)
    context.sslobject_class = _CallerObject
    return context
