"""Google service-account keys: how both programs load one, and the largest they take.

The operator checks a key when its Secret changes; the proxy loads it to sign token requests.
Both must agree, or a key the operator called ready would fail on every fetch.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

# Signing with a larger key costs the proxy milliseconds of CPU per token; Google issues 2,048.
MAX_RSA_BITS = 4096


def load_rsa_key(pem: bytes) -> rsa.RSAPrivateKey:
    """A PEM RSA private key, parsed in well under a millisecond whatever its size."""
    key = serialization.load_pem_private_key(pem, None, unsafe_skip_rsa_key_validation=True)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("not an RSA private key")
    return key
