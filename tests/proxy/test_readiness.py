"""What one proxy process says of its table in ``/readyz``: the keys a key rotation waits on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from tests.proxy.serving import KEYRING, Tenant, running_proxy, upstream


def test_readiness_names_the_keyring_keys_the_credentials_are_encrypted_with(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with upstream() as origin:
            tenant = Tenant(
                "one", origin, auth="apiKey", secret="s3cret", parameter="key", location="query"
            )
            async with (
                running_proxy(tmp_path, [tenant]) as proxy,
                httpx.AsyncClient(timeout=10) as client,
            ):
                ready = (await client.get(f"{proxy.admin_url}/readyz")).json()
        assert ready["signedWith"] == KEYRING.active
        assert ready["encryptedWith"] == [KEYRING.active]
        # The name before 0.2.0, kept as an alias for one release.
        assert ready["sealedWith"] == ready["encryptedWith"]

    asyncio.run(scenario())
