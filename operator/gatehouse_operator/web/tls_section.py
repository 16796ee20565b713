"""The connection page's "TLS to the API" (``spec.tls``): where its client certificate comes from,
what the operator read of it (subject, issuer, expiry: never the key), and the CAs trusted."""

from __future__ import annotations

from pydantic import JsonValue

from gatehouse_operator.connections.models import ConnectionDetail


def tls_view(detail: ConnectionDetail) -> list[tuple[str, str]] | None:
    """The section's rows, for a connection with spec.tls (None for one without)."""
    tls = detail.tls
    if tls is None:
        return None
    rows = [("Client certificate", _source(tls.get("clientCertificate")))]
    read = detail.client_certificate or {}
    if read:
        rows += [
            ("Subject", str(read.get("subject", ""))),
            ("Issuer", str(read.get("issuer", ""))),
            ("Expires", str(read.get("notAfter", ""))),
        ]
    ref = tls.get("caBundleRef")
    if tls.get("caBundle"):
        cas = str(tls["caBundle"]).count("-----BEGIN CERTIFICATE-----")
        bundle = f"{cas} certificate{'s' if cas != 1 else ''}, in the spec"
    elif isinstance(ref, dict):
        bundle = f"key {ref.get('key', 'ca.crt')} of Secret {ref.get('name', '')}"
    else:
        bundle = "none"
    rows.append(("CA bundle", bundle))
    only = tls.get("systemRoots") is False
    rows.append(("System roots", "not trusted: the CA bundle alone" if only else "trusted too"))
    return rows


def _source(certificate: JsonValue) -> str:
    if not isinstance(certificate, dict):
        return "none"
    ref = certificate.get("secretRef")
    if isinstance(ref, dict):
        return f"Secret {ref.get('name', '')} (kubernetes.io/tls)"
    return "sealed (gatehouse seal --tls-cert --tls-key)"
