"""What a vendor's Retry-After does through a real proxy (the Starlette app on 127.0.0.1, a real
upstream): the app gets the vendor's own status whatever it wrote, never a 500; a value in the
RFC's grammar pauses the endpoint for at most MAX_PAUSE_SECONDS, and the operator is told that
bounded value; anything else pauses nothing. The fleet and the operator's Event are
tests/e2e/test_vendor_pause.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from gatehouse_contract.frames import MAX_PAUSE_SECONDS, RenewalsBounded, Throttled
from tests.proxy.serving import Tenant, running_proxy, upstream

# (Retry-After, whether it pauses the connection)
VALUES = [
    ("²", False),  # isdigit() accepts it, int() refuses it
    ("①", False),
    ("٣", False),  # int() reads 3; the grammar wants ASCII digits
    ("+5", False),
    ("5.0", False),
    ("-5", False),
    ("Fri, 31 Dec 99999999999999999999 23:59:59 GMT", False),  # no datetime holds it
    ("Fri, 31 Dec 9999 23:59:59 GMT", True),
    ("999999999999", True),  # R4-1's 12 digits
]


@pytest.mark.parametrize("status", [429, 503])
def test_whatever_the_vendor_writes_the_app_gets_its_status_and_the_pause_is_bounded(
    tmp_path: Path, status: int
) -> None:
    async def scenario() -> None:
        async with upstream() as origin:
            tenants = [Tenant(f"t{index}", origin) for index in range(len(VALUES))]
            async with (
                running_proxy(tmp_path, tenants) as running,
                httpx.AsyncClient(timeout=10) as client,
            ):
                told: list[Throttled] = []

                async def tell(message: Throttled | RenewalsBounded) -> None:
                    assert isinstance(message, Throttled), message
                    told.append(message)

                running.proxy.feed.tell = tell  # type: ignore[method-assign]
                for tenant, (value, pauses) in zip(tenants, VALUES, strict=True):
                    headers = {"Authorization": f"Bearer {tenant.token}"}
                    said = await client.get(
                        f"{running.url}/v1/fetch/api/status/{status}",
                        params={"header": f"Retry-After:{value}"},
                        headers=headers,
                    )
                    assert said.status_code == status, (value, said.text)
                    assert said.headers["retry-after"] == value  # relayed as the vendor wrote it
                    # The endpoint it came on (a pause covers that, unless the connection says
                    # the answer is the credential's limit), asked again without the header.
                    then = await client.get(
                        f"{running.url}/v1/fetch/api/status/{status}", headers=headers
                    )
                    if not pauses:
                        assert then.status_code == status, (value, then.text)
                        assert "retry-after" not in then.headers, (value, then.text)
                        continue
                    assert then.status_code == 429, (value, then.text)
                    assert then.json()["error"]["code"] == "rate_limited"
                    left = int(then.headers["retry-after"])
                    assert MAX_PAUSE_SECONDS - 2 <= left <= MAX_PAUSE_SECONDS, value
                await asyncio.sleep(0)
                assert [(said.connection, said.status) for said in told] == [
                    ("t7/api", status),
                    ("t8/api", status),
                ]
                assert all(0 < said.seconds <= MAX_PAUSE_SECONDS for said in told)
                assert told[1].seconds == MAX_PAUSE_SECONDS

    asyncio.run(scenario())
