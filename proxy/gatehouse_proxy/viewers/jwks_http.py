"""Reading an issuer's keys: its JWKS URL over HTTP (the proxy's one network edge for them), or a
mounted Secret's file.

The URL is the installation's (Helm values), trusted as it set it, as the Google token endpoint
is: no connection can name one. Redirects are not followed, the answer must be a 200 within
``timeout_seconds`` and :data:`~gatehouse_proxy.viewers.keys.MAX_JWKS_BYTES`; anything else is a
:class:`~gatehouse_proxy.viewers.keys.KeysUnreadable` saying which.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path

import aiohttp

from gatehouse_proxy.http.bounded_reads import read_within
from gatehouse_proxy.viewers.issuer_keys import Load
from gatehouse_proxy.viewers.keys import MAX_JWKS_BYTES, KeysUnreadable
from gatehouse_proxy.viewers.trust import TrustedIssuer


class JwksClient:
    """The HTTP client of every issuer's JWKS URL in this process, opened when first used."""

    def __init__(self, tls: ssl.SSLContext, timeout_seconds: float = 5.0) -> None:
        self.tls = tls
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    def loader(self, url: str) -> Load:
        async def load() -> bytes:
            return await self.read(url)

        return load

    async def read(self, url: str) -> bytes:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.tls, limit=8),
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                timeout=self.timeout,
            )
        try:
            async with self._session.get(
                url, allow_redirects=False, headers={"Accept": "application/json"}
            ) as answer:
                if answer.status != 200:
                    raise KeysUnreadable(f"the JWKS URL answered {answer.status}")
                if (answer.content_length or 0) > MAX_JWKS_BYTES:
                    raise KeysUnreadable(f"the key set is over {MAX_JWKS_BYTES} bytes")
                body = await read_within(answer.content.iter_chunked(16 * 1024), MAX_JWKS_BYTES)
                if body is None:
                    raise KeysUnreadable(f"the key set is over {MAX_JWKS_BYTES} bytes")
        except (aiohttp.ClientError, TimeoutError) as error:
            problem = f"the JWKS URL could not be read ({type(error).__name__})"
            raise KeysUnreadable(problem) from None
        return body

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def file_loader(path: Path) -> Load:
    """A key set in a file (a mounted Secret's key, which the kubelet updates in place), read
    off the event loop."""

    def read() -> bytes:
        with path.open("rb") as file:
            return file.read(MAX_JWKS_BYTES + 1)

    async def load() -> bytes:
        return await asyncio.to_thread(read)

    return load


def issuer_loader(client: JwksClient) -> Callable[[TrustedIssuer], Load]:
    """How each trusted issuer's keys are read: its JWKS URL with ``client``, or its file."""

    def loader(issuer: TrustedIssuer) -> Load:
        if issuer.keys_file is not None:
            return file_loader(issuer.keys_file)
        return client.loader(issuer.jwks_url)

    return loader
