"""The table channel's certificate: the same at both ends, and telling nothing of its key."""

from __future__ import annotations

from cryptography import x509

from gatehouse_contract import channel_tls
from gatehouse_contract.keyring import Keyring


def test_the_serial_tells_nothing_of_the_private_seed() -> None:
    keyring = Keyring.generate("k1")
    seed = keyring.derived("k1", b"gatehouse/channel-tls")
    pem = channel_tls.certificate_pem(keyring, "k1")
    serial = x509.load_pem_x509_certificate(pem).serial_number
    # Before, the serial was the seed's first 127 bits, shown to anyone who completed a
    # handshake: half of the private key.
    assert serial != int.from_bytes(seed[:16]) >> 1
    assert 0 < serial < 2**127


def test_the_operator_and_every_replica_derive_the_same_certificate() -> None:
    keyring = Keyring.generate("k1")
    first = channel_tls.certificate_pem(keyring, "k1")
    channel_tls._certificate.cache_clear()  # made again, as in another process
    assert channel_tls.certificate_pem(Keyring.parse(keyring.dump()), "k1") == first
