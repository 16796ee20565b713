"""Keeping injected credentials out of what goes back to apps and into test results.

An upstream may echo the credential the proxy injected: in an error message, a request dump, or a
next-page URL that carries an API key in its query. Whatever comes back is scrubbed of the
injected values as sent, URL-encoded and JSON-escaped. Bodies are scrubbed as they stream, with a
carry-over as long as the longest form, so a value split across chunks is caught too.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from urllib.parse import quote

REDACTED = "[redacted]"
_REDACTED_BYTES = REDACTED.encode()


def secret_forms(secrets: Iterable[str]) -> list[str]:
    """Each secret as sent, URL-encoded and JSON-escaped; longest first."""
    forms = {
        form
        for secret in secrets
        if secret
        for form in (secret, quote(secret, safe=""), json.dumps(secret)[1:-1])
    }
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
