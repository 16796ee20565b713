"""Keeping injected credentials out of what goes back to apps and into test results.

An upstream may echo the credential the proxy injected: in an error message, a request dump, or a
next-page URL that carries an API key in its query. Bodies are scrubbed of the injected values as
sent, %-encoded (either hex case, ``%20`` or ``+`` for a space) and JSON-escaped, as they stream,
with a carry-over as long as the longest form, so a value split across chunks is caught too.

Bodies use literal replacement, which runs at memory speed on the proxy's hot path; headers, which
are few and small, use the fuller per-character matcher in ``headers``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
_REDACTED_BYTES = REDACTED.encode()
_HEX_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def _forms(secret: str) -> set[str]:
    encoded = {quote(secret, safe=""), quote_plus(secret, safe="")}
    lowered = {_HEX_ESCAPE.sub(lambda m: m[0].lower(), form) for form in encoded}
    return {secret, json.dumps(secret)[1:-1], *encoded, *lowered}


def secret_forms(secrets: Iterable[str]) -> list[str]:
    """Every form of every secret, longest first (so a longer form is replaced whole)."""
    forms = {form for secret in secrets if secret for form in _forms(secret)}
    return sorted(forms, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    for form in secret_forms(secrets):
        text = text.replace(form, REDACTED)
    return text


class BodyScrubber:
    """Scrubs a body chunk by chunk; ``feed`` each chunk, then ``flush`` the rest."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.forms = [form.encode() for form in secret_forms(secrets)]
        self.keep = max((len(form) for form in self.forms), default=1) - 1
        self.carry = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self.carry + chunk
        for form in self.forms:
            data = data.replace(form, _REDACTED_BYTES)
        # The tail may hold the start of a secret that the next chunk completes.
        cut = max(len(data) - self.keep, 0)
        self.carry = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        rest, self.carry = self.carry, b""
        return rest


async def scrubbed(chunks: AsyncIterator[bytes], secrets: Iterable[str]) -> AsyncIterator[bytes]:
    scrubber = BodyScrubber(secrets)
    async for chunk in chunks:
        out = scrubber.feed(chunk)
        if out:
            yield out
    rest = scrubber.flush()
    if rest:
        yield rest
