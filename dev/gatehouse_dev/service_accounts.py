"""Google service-account key files for tests: a real RSA key in Google's JSON layout."""

from __future__ import annotations

import json

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def service_account_key(
    email: str = "reporter@gatehouse-test.iam.gserviceaccount.com",
    *,
    token_uri: str = "https://oauth2.googleapis.com/token",  # noqa: S107 (a URL)
    key_size: int = 2048,
) -> tuple[bytes, rsa.RSAPublicKey]:
    """The key file's bytes and the public half a token endpoint verifies assertions with."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=key_size)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    document = {
        "type": "service_account",
        "project_id": "gatehouse-test",
        "private_key_id": "test-key-1",
        "private_key": pem,
        "client_email": email,
        "client_id": "1234567890",
        "token_uri": token_uri,
    }
    return json.dumps(document).encode(), key.public_key()
