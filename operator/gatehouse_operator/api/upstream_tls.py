"""``spec.tls`` of an ExternalConnection: the TLS of its calls to the API beyond the defaults.

A client certificate (mTLS) from a ``kubernetes.io/tls`` Secret or sealed, and CAs the API's
certificate may chain to (an enterprise's private CA), beside the system's roots unless the
connection says otherwise. Host names are always verified. The operator checks what the schema
cannot (the PEM parses, the key matches the certificate, the certificate is current) and
encrypts the chain and key for the proxies as it does a credential
(``gatehouse_contract.routes.UpstreamTls``).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from gatehouse_contract.routes import MAX_CA_BUNDLE_CHARS
from gatehouse_operator.api.meta import DNS_SUBDOMAIN, SEALED_VALUE, Model
from gatehouse_operator.cel import cel, validations

# A client certificate's chain and key, sealed (the chain may be three or four RSA certificates).
MAX_SEALED_CERTIFICATE_CHARS = 65_536
# The key a CA bundle's Secret holds it under when the ref names none (cert-manager's).
DEFAULT_CA_KEY = "ca.crt"

ONE_CLIENT_CERTIFICATE = (
    "tls.clientCertificate needs exactly one of secretRef (a kubernetes.io/tls Secret) and "
    "sealed (gatehouse seal --tls-cert --tls-key)"
)
ONE_CA_BUNDLE = "tls.caBundle and tls.caBundleRef: at most one may be given"
SYSTEM_ROOTS_NEED_A_BUNDLE = (
    "tls.systemRoots may be false only with tls.caBundle or tls.caBundleRef: without the "
    "system's roots and without a CA of its own, no certificate of the API would verify"
)
CA_BUNDLE_IS_PEM = "tls.caBundle must hold PEM certificates (-----BEGIN CERTIFICATE-----)"
TLS_NEEDS_HTTPS = (
    "tls needs an https:// baseURL: a client certificate and CAs apply only to TLS calls"
)


class TlsSecretRef(Model):
    """A Secret of type kubernetes.io/tls in the connection's own namespace."""

    name: str = Field(
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="The Secret's name; it holds tls.crt (the certificate, then its chain) and "
        "tls.key, as cert-manager writes them.",
    )


class ClientCertificate(Model):
    """The certificate the proxy presents to the API (mTLS), and its private key."""

    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel("has(self.secretRef) != has(self.sealed)", ONE_CLIENT_CERTIFICATE)
        )
    }

    secret_ref: TlsSecretRef | None = Field(
        default=None,
        description="A kubernetes.io/tls Secret of the namespace: updating it rotates the "
        "certificate, without dropping requests in flight. Never copied into this resource.",
    )
    sealed: str | None = Field(
        default=None,
        max_length=MAX_SEALED_CERTIFICATE_CHARS,
        pattern=SEALED_VALUE,
        description="The certificate chain and private key (PEM) sealed to the operator "
        "(gatehouse seal --tls-cert --tls-key), instead of secretRef: safe to commit, opened "
        "only by the operator, and only for this connection's name, namespace and baseURL.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> ClientCertificate:
        if (self.secret_ref is None) == (self.sealed is None):
            raise ValueError(ONE_CLIENT_CERTIFICATE)
        return self


class CaBundleRef(Model):
    """A key of a Secret in the connection's namespace holding PEM CAs. A Secret, not a
    ConfigMap: the operator may read no ConfigMap (kube-system's included), a right RBAC could
    not narrow to the ones connections name."""

    name: str = Field(max_length=253, pattern=DNS_SUBDOMAIN, description="The Secret's name.")
    key: str = Field(
        default=DEFAULT_CA_KEY,
        max_length=253,
        pattern=r"^[-._a-zA-Z0-9]+$",
        description=f"The key within its data (default {DEFAULT_CA_KEY}).",
    )


class UpstreamTlsSettings(Model):
    """How the proxy's TLS to the API differs from the defaults (the system's roots, no client
    certificate). Host names are verified whatever is set here."""

    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel("!(has(self.caBundle) && has(self.caBundleRef))", ONE_CA_BUNDLE),
            cel(
                "self.systemRoots || has(self.caBundle) || has(self.caBundleRef)",
                SYSTEM_ROOTS_NEED_A_BUNDLE,
            ),
        )
    }

    client_certificate: ClientCertificate | None = Field(
        default=None,
        description="The client certificate presented to the API (mTLS), beside any auth "
        "type. Its key is a credential: never shown, logged or copied into a status.",
    )
    ca_bundle: str | None = Field(
        default=None,
        max_length=MAX_CA_BUNDLE_CHARS,
        json_schema_extra=validations(
            cel("self.contains('-----BEGIN CERTIFICATE-----')", CA_BUNDLE_IS_PEM)
        ),
        description="PEM certificates of the CAs the API's certificate may chain to (a private "
        "or enterprise CA), at most 64 KiB; or caBundleRef.",
    )
    ca_bundle_ref: CaBundleRef | None = Field(
        default=None,
        description="The CA bundle from a key of a Secret in the namespace (such as the ca.crt "
        "cert-manager writes), instead of caBundle.",
    )
    system_roots: bool = Field(
        default=True,
        description="Whether the system's roots are trusted too (the default). False only with "
        "a CA bundle: then the API's certificate must chain to it.",
    )

    @model_validator(mode="after")
    def _bundles(self) -> UpstreamTlsSettings:
        if self.ca_bundle is not None and self.ca_bundle_ref is not None:
            raise ValueError(ONE_CA_BUNDLE)
        if not self.system_roots and self.ca_bundle is None and self.ca_bundle_ref is None:
            raise ValueError(SYSTEM_ROOTS_NEED_A_BUNDLE)
        if self.ca_bundle is not None and "-----BEGIN CERTIFICATE-----" not in self.ca_bundle:
            raise ValueError(CA_BUNDLE_IS_PEM)
        return self


class ClientCertificateSummary(Model):
    """What the status says of the client certificate in use: never its key."""

    subject: str = Field(max_length=1024, description="The certificate's subject (RFC 4514).")
    issuer: str = Field(max_length=1024, description="Its issuer (RFC 4514).")
    not_after: str = Field(max_length=64, description="When it expires (RFC 3339).")
