"""The table channel's security: how a replica proves itself, and how every frame is signed.

A proxy replica opens one WebSocket to the operator (``CHANNEL_PATH``, TLS: see
:mod:`gatehouse_contract.channel_tls`) and keeps it open. The operator sends a snapshot of the
routing table, then deltas, heartbeats and connection tests; the replica answers with what it
installed (acks), what it refused (nacks, with why), requests for a new snapshot and test results.
What the frames say is :mod:`gatehouse_contract.frames`; this module is how they travel.

Nothing static travels: the replica signs its opening request with a key derived from the keyring,
over a timestamp and a random nonce, and every frame the operator sends is signed over that nonce
and the frame's sequence number. A frame recorded on one stream is worthless on any other, and on
its own stream it is refused once the sequence has moved past it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import time

from gatehouse_contract.keyring import Keyring

CHANNEL_PATH = "/v1/channel"
# The operator sends a heartbeat this often; a side that hears nothing for MISSED_HEARTBEATS of
# them closes the stream (and the replica opens a new one).
HEARTBEAT_SECONDS = 5.0
MISSED_HEARTBEATS = 3
# How far a replica's clock may be from the operator's when it opens the stream.
CLOCK_SKEW_SECONDS = 120
# The largest frame a replica accepts (a snapshot): far above what 10,000 connections make, and a
# bound on what a broken or hostile stream can make it buffer.
MAX_FRAME_BYTES = 256 * 1024 * 1024

_FRAME_MAGIC = b"GH1"
_SEQ = struct.Struct(">Q")
_MAC_BYTES = 32


class ChannelRefused(ValueError):
    """An opening request that does not authenticate; the message says which rule it broke."""


class FrameRejected(ValueError):
    """A frame that is not the operator's next one on this stream."""


# --- The opening request -----------------------------------------------------------------------

AUTH_SCHEME = "Gatehouse-Channel"


def _request_text(replica: str, timestamp: int, nonce: str) -> bytes:
    return f"GET\n{CHANNEL_PATH}\n{replica}\n{timestamp}\n{nonce}".encode()


def new_nonce() -> str:
    return os.urandom(16).hex()


def sign_request(keyring: Keyring, replica: str, nonce: str, now: float | None = None) -> str:
    """The ``Authorization`` value of a replica's opening request."""
    timestamp = int(time.time() if now is None else now)
    key = keyring.derived(keyring.active, b"gatehouse/channel-request")
    mac = hmac.new(key, _request_text(replica, timestamp, nonce), hashlib.sha256).hexdigest()
    return f"{AUTH_SCHEME} key={keyring.active},ts={timestamp},nonce={nonce},sig={mac}"


def verify_request(
    keyring: Keyring, authorization: str, replica: str, now: float | None = None
) -> str:
    """The stream's nonce, if ``authorization`` is a fresh signature by a keyring key."""
    scheme, _, rest = authorization.partition(" ")
    if scheme != AUTH_SCHEME:
        raise ChannelRefused(f"the Authorization scheme must be {AUTH_SCHEME}")
    fields = dict(part.partition("=")[::2] for part in rest.split(","))
    try:
        key_id, nonce, mac = fields["key"], fields["nonce"], fields["sig"]
        timestamp = int(fields["ts"]) if fields["ts"].isascii() else -1
    except (KeyError, ValueError):
        raise ChannelRefused("Authorization needs key, ts, nonce and sig") from None
    if len(nonce) != 32 or not all(c in "0123456789abcdef" for c in nonce):
        raise ChannelRefused("the nonce must be 16 random bytes in hex")
    if not replica or len(replica) > 253:
        raise ChannelRefused("the replica must name itself (X-Gatehouse-Replica)")
    skew = abs((time.time() if now is None else now) - timestamp)
    if skew > CLOCK_SKEW_SECONDS:
        raise ChannelRefused(f"the request is {skew:.0f}s from the operator's clock")
    if key_id not in keyring.key_ids:
        raise ChannelRefused("the request is signed with a key the operator does not have")
    key = keyring.derived(key_id, b"gatehouse/channel-request")
    expected = hmac.new(key, _request_text(replica, timestamp, nonce), hashlib.sha256).hexdigest()
    # Bytes, since compare_digest raises on a str with non-ASCII characters.
    if not hmac.compare_digest(expected.encode(), mac.encode("utf-8", "surrogateescape")):
        raise ChannelRefused("the request's signature does not verify")
    return nonce


# --- Frames from the operator ------------------------------------------------------------------


def sign_frame(keyring: Keyring, nonce: str, seq: int, payload: bytes) -> bytes:
    """``GH1 | key id length | key id | sequence | HMAC(nonce | sequence | payload) | payload``."""
    key_id = keyring.active.encode()
    seq_bytes = _SEQ.pack(seq)
    mac = hmac.new(keyring.derived(keyring.active, b"gatehouse/channel-frame"), digestmod="sha256")
    mac.update(nonce.encode())
    mac.update(seq_bytes)
    mac.update(payload)
    return b"".join((_FRAME_MAGIC, bytes([len(key_id)]), key_id, seq_bytes, mac.digest(), payload))


def verify_frame(
    keyring: Keyring, nonce: str, expected_seq: int, frame: bytes
) -> tuple[str, bytes]:
    """The signing key and payload of the operator's next frame on the stream ``nonce``."""
    view = memoryview(frame)
    if len(frame) < 4 or view[:3] != _FRAME_MAGIC:
        raise FrameRejected("not a channel frame")
    key_length = frame[3]
    header_end = 4 + key_length + _SEQ.size + _MAC_BYTES
    if len(frame) < header_end:
        raise FrameRejected("the frame is shorter than its header")
    key_id = bytes(view[4 : 4 + key_length]).decode("ascii", errors="replace")
    seq_bytes = bytes(view[4 + key_length : 4 + key_length + _SEQ.size])
    received = bytes(view[header_end - _MAC_BYTES : header_end])
    payload = view[header_end:]
    if key_id not in keyring.key_ids:
        raise FrameRejected(f"the frame is signed with an unknown key {key_id[:40]!r}")
    mac = hmac.new(keyring.derived(key_id, b"gatehouse/channel-frame"), digestmod="sha256")
    mac.update(nonce.encode())
    mac.update(seq_bytes)
    mac.update(payload)
    if not hmac.compare_digest(mac.digest(), received):
        raise FrameRejected("the frame's signature does not verify (not for this stream?)")
    (seq,) = _SEQ.unpack(seq_bytes)
    if seq != expected_seq:
        raise FrameRejected(f"frame {seq} arrived where {expected_seq} was due (a replay?)")
    return key_id, bytes(payload)
