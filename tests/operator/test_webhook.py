"""The webhook's self-signed certificate: names, its own CA, and a life longer than the process."""

from __future__ import annotations

import datetime
import ipaddress

from cryptography import x509

from gatehouse_operator.webhook import WebhookServer


def test_the_certificate_names_the_service_and_outlives_the_operator() -> None:
    pem, key = WebhookServer.build_certificate(
        ["gatehouse-operator.gatehouse-system.svc", "127.0.0.1", "0.0.0.0"]  # noqa: S104
    )
    certificate = x509.load_pem_x509_certificate(pem)
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["gatehouse-operator.gatehouse-system.svc"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    life = certificate.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert life > datetime.timedelta(days=9 * 365)
    assert key.startswith(b"-----BEGIN PRIVATE KEY-----")
