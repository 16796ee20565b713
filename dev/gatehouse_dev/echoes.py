"""A credential echoed in the forms a hostile or careless upstream used (red-team round 3, N7),
and what app code could make of a body: the stand-in upstream echoes the injected credential in
each form (``/echo-as/{form}``), and the tests check that no reading of what an app gets holds it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gzip
import html
import json
import quopri
import re
import zlib
from collections.abc import Callable, Mapping
from urllib.parse import quote, quote_plus, unquote_to_bytes


def injected(headers: Mapping[str, str]) -> str:
    """The credential the proxy injected, from a request's headers (case-insensitive): an API key
    header's value, or a bearer token."""
    key = headers.get("X-Api-Key")
    if key is not None:
        return key
    return headers.get("Authorization", "").removeprefix("Bearer ")


def _wrapped(text: str, width: int, newline: str) -> str:
    return newline.join(text[at : at + width] for at in range(0, len(text), width))


def _b64(secret: str) -> str:
    return base64.b64encode(secret.encode()).decode()


def _mixed_case(text: str) -> str:
    return "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(text))


# Each a name for a URL, and the form: hex (in either or mixed case), the value in other case,
# base64 wrapped (MIME at 76 with CRLF, PEM at 64, at 8, at every character, base64url, in a JSON
# string with escaped line breaks, PHP's JSON with "\/" too), quoted-printable (escapes, soft
# breaks), UTF-16, HTML references (zero-padded, without ";"), IIS's %uXXXX, \xHH, "&amp" without
# ";", the longest form the scrubber's carry-over is sized for, and percent-encoded twice.
FORMS: dict[str, Callable[[str], bytes]] = {
    "hex": lambda s: s.encode().hex().encode(),
    "hex-upper": lambda s: s.encode().hex().upper().encode(),
    "hex-mixed-case": lambda s: _mixed_case(s.encode().hex()).encode(),
    "upper-cased": lambda s: s.upper().encode(),
    "lower-cased": lambda s: s.lower().encode(),
    "base64-mime": lambda s: _wrapped(_b64("x" * 50 + s), 76, "\r\n").encode(),
    "base64-pem": lambda s: _wrapped(_b64("xy" * 20 + s), 64, "\n").encode(),
    "base64-every-8": lambda s: _wrapped(_b64(s), 8, "\n").encode(),
    "base64-every-character": lambda s: _wrapped(_b64(s), 1, "\r\n").encode(),
    "base64url-76": lambda s: _wrapped(
        base64.urlsafe_b64encode(("x" * 50 + s).encode()).decode(), 76, "\r\n"
    ).encode(),
    "base64-json-line-breaks": lambda s: json.dumps(
        {"pem": _wrapped(_b64("x" * 42 + s), 64, "\n")}
    ).encode(),
    "base64-php-json": lambda s: (
        json.dumps({"pem": _wrapped(_b64("x" * 50 + s), 76, "\r\n")}).replace("/", "\\/").encode()
    ),
    "quoted-printable": lambda s: "".join(f"={c:02X}" for c in s.encode()).encode(),
    "quoted-printable-soft-breaks": lambda s: quopri.encodestring(
        ("x" * 70 + s + " " + s).encode()
    ),
    "quoted-printable-soft-break-every-byte": lambda s: "".join(
        f"={c:02x}=\r\n" for c in s.encode()
    ).encode(),
    "utf-16le": lambda s: s.encode("utf-16-le"),
    "utf-16be": lambda s: s.encode("utf-16-be"),
    "utf-16-bom": lambda s: s.encode("utf-16"),
    "reference-hex-zero-padded": lambda s: "".join(f"&#x0000{c:x};" for c in s.encode()).encode(),
    "reference-zero-padded": lambda s: "".join(f"&#0000{c};" for c in s.encode()).encode(),
    "reference-40-zeros": lambda s: "".join(f"&#{'0' * 40}{c};" for c in s.encode()).encode(),
    "reference-unterminated": lambda s: "".join(f"&#{c}" for c in s.encode()).encode(),
    "reference-hex-unterminated": lambda s: "".join(f"&#x{c:X}" for c in s.encode()).encode(),
    "percent-u": lambda s: "".join(f"%u{ord(c):04X}" for c in s).encode(),
    "backslash-x": lambda s: "".join(f"\\x{c:02x}" for c in s.encode()).encode(),
    "amp-unterminated": lambda s: s.replace("&", "&amp").encode(),
    "reference-and-json-line-break-every-byte": lambda s: "".join(
        f"&#x000000{c:x};\\r\\n" for c in s.encode()
    ).encode(),
    # A URL echoed inside another URL (a "return_to" or "self" link): percent-encoded twice.
    "percent-twice": lambda s: quote(quote(s, safe=""), safe="").encode(),
    "percent-twice-lower-case": lambda s: re.sub(
        "%[0-9A-F]{2}", lambda m: m[0].lower(), quote(quote(s, safe=""), safe="")
    ).encode(),
    "form-encoded-twice": lambda s: quote_plus(quote_plus(s)).encode(),
}


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-15)
    return compressor.compress(data) + compressor.flush()


# An answer compressed though the proxy asked for identity: its Content-Encoding, and how its
# body was compressed. "br" is not brotli: it is refused unread, and would leak if relayed.
COMPRESSED: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "gzip": ("gzip", gzip.compress),
    "x-gzip": ("x-gzip", gzip.compress),
    "deflate": ("deflate", zlib.compress),
    "raw-deflate": ("deflate", _raw_deflate),
    "gzip-then-deflate": ("gzip, deflate", lambda data: zlib.compress(gzip.compress(data))),
    "gzip-members": ("gzip", lambda data: gzip.compress(data[:9]) + gzip.compress(data[9:])),
    "br": ("br", lambda data: data),
}


def readings(body: bytes) -> list[bytes]:
    """What app code could make of a body: as it is, and decoded every way a form above is."""
    found = [body, quopri.decodestring(body)]
    for decompress in (gzip.decompress, zlib.decompress, lambda data: zlib.decompress(data, -15)):
        with contextlib.suppress(OSError, EOFError, zlib.error):
            found.append(decompress(body))
    unwrapped = re.sub(rb"\s|\\[rn]", b"", body).replace(b"\\/", b"/")
    for run in re.findall(rb"[A-Za-z0-9+/=_-]{8,}", unwrapped):
        for start in range(4):
            piece = run[start:].translate(bytes.maketrans(b"-_", b"+/"))
            with contextlib.suppress(binascii.Error):
                found.append(binascii.a2b_base64(piece[: len(piece) - len(piece) % 4]))
    for run in re.findall(rb"[0-9a-fA-F]{2,}", unwrapped):
        for start in (0, 1):
            found.append(bytes.fromhex(run[start : len(run) - (len(run) - start) % 2].decode()))
    for codec in ("utf-16-le", "utf-16-be"):
        for start in (0, 1):
            found.append(body[start:].decode(codec, "ignore").encode())
    text = body.decode("latin-1")
    found.append(html.unescape(text).encode())
    found.append(html.unescape(unwrapped.decode("latin-1")).encode())
    found.append(re.sub(r"%u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text).encode())
    found.append(
        re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m[1], 16)), text).encode("latin-1")
    )
    return found


def _percent_decoded(reading: bytes) -> list[bytes]:
    """A reading percent-decoded once and twice (a URL inside a URL), with ``+`` read as a
    space and as itself."""
    found = []
    for plus in (b" ", b"+"):
        once = unquote_to_bytes(reading.replace(b"+", plus))
        found += [once, unquote_to_bytes(once.replace(b"+", plus))]
    return found


def leaks(body: bytes, secret: str) -> bool:
    """Whether any reading of ``body``, also percent-decoded (a form-encoded value, and inside
    base64: HTTP Basic's form-encoded client secret), holds ``secret``, in any case."""
    wanted = secret.lower().encode()
    for reading in readings(body):
        if any(wanted in decoded.lower() for decoded in [reading, *_percent_decoded(reading)]):
            return True
    return False
