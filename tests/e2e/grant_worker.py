"""One proxy worker's grants, as a process of its own: tests/e2e/test_grants.py runs four of them
(two replicas of two workers, as far as the grants are concerned) against a real redis-server and
the dev authorization server, and kills them mid-refresh.

``python -m tests.e2e.grant_worker MODE`` with the settings in the environment (the store's
password is never on a command line):

- ``connect``: connects each owner (scripted consent, the code exchanged, the grant kept);
- ``burst``: at the wall-clock time ``GRANTS_AT``, ``GRANTS_COUNT`` concurrent requests for the
  first owner; prints the set of tokens they got;
- ``cycle``: until ``GRANTS_UNTIL``, ``GRANTS_CONCURRENCY`` loops per owner each asking for the
  owner's token and calling the server's API with it, which names the user the token is for. A
  refusal is written to ``GRANTS_OUT`` at once (a line of JSON), the counts every 0.2 s: a worker
  killed loses at most those.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import secrets
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import aiohttp

from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.routes import TokenRequest
from gatehouse_proxy.credentials.fleet_grants import FleetGrants, GrantClient
from gatehouse_proxy.credentials.token_grants import TokenClient
from gatehouse_proxy.errors import ProxyError
from gatehouse_proxy.store.grant_store import GrantStore
from gatehouse_proxy.store.shared_store import SharedStore, StoreSettings
from gatehouse_proxy.store.shares import Shares, ShareSettings
from gatehouse_proxy.upstream.forwarder import new_session, tls_context
from gatehouse_proxy.upstream.network_guard import NetworkPolicy
from tests.proxy.stores import quota_route

CONNECTION = quota_route("team/crm", "uid-crm")
CLIENT_ID = "crm"
REDIRECT = "http://127.0.0.1:9/callback"
WITHIN_SECONDS = 4.0


def _owners() -> list[str]:
    return os.environ["GRANTS_OWNERS"].split(",")


async def _connect(grants: FleetGrants, client: GrantClient, base: str, owner: str) -> None:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    query = {
        "response_type": "code",
        "client_id": CLIENT_ID,
        "redirect_uri": REDIRECT,
        "scope": "read",
        "code_challenge": challenge.decode().rstrip("="),
        "code_challenge_method": "S256",
        "consent": "approve",
        "user": owner,
    }
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{base}/authorize", params=query, allow_redirects=False) as reply,
    ):
        code = parse_qs(urlsplit(reply.headers["Location"]).query)["code"][0]
    tokens = await grants.exchange(CONNECTION, client, code, REDIRECT, verifier)
    await grants.store(CONNECTION, owner, client, tokens)


class Counts:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.counts: Counter[str] = Counter()
        self.counts_file = out.with_name(f"{out.stem}-{os.getpid()}.counts")

    def refused(self, owner: str, what: str, detail: str) -> None:
        self.counts[what] += 1
        with self.out.open("a") as out:
            out.write(json.dumps({"owner": owner, "what": what, "detail": detail}) + "\n")

    def flush(self) -> None:
        # Replaced whole: a worker killed mid-write leaves the last counts, not half of them.
        partial = self.counts_file.with_suffix(".partial")
        partial.write_text(json.dumps(self.counts))
        partial.replace(self.counts_file)

    async def flush_every(self, seconds: float) -> None:
        while True:
            self.flush()
            await asyncio.sleep(seconds)


async def _cycle(
    grants: FleetGrants, client: GrantClient, base: str, session: aiohttp.ClientSession
) -> None:
    counts = Counts(Path(os.environ["GRANTS_OUT"]))
    until = float(os.environ["GRANTS_UNTIL"])

    async def loop(owner: str) -> None:
        while time.time() < until:
            try:
                token = await grants.access_token(CONNECTION, owner, client, within=WITHIN_SECONDS)
            except ProxyError as error:
                counts.refused(owner, error.code, error.message)
                await asyncio.sleep(0.05)
                continue
            headers = {"Authorization": f"Bearer {token}"}
            async with session.get(f"{base}/api/me", headers=headers) as reply:
                if reply.status != 200:
                    counts.counts["api_refused"] += 1  # expired on its way: not the grant's
                    continue
                user = (await reply.json())["user"]
            if user != owner:
                counts.refused(owner, "another_owners_token", user)
            counts.counts["ok"] += 1

    flushing = asyncio.ensure_future(counts.flush_every(0.2))
    concurrency = int(os.environ.get("GRANTS_CONCURRENCY", "3"))
    await asyncio.gather(*(loop(owner) for owner in _owners() for _ in range(concurrency)))
    flushing.cancel()
    counts.flush()


async def _burst(grants: FleetGrants, client: GrantClient) -> None:
    owner, count = _owners()[0], int(os.environ["GRANTS_COUNT"])
    await asyncio.sleep(max(float(os.environ["GRANTS_AT"]) - time.time(), 0))
    tokens = await asyncio.gather(
        *(
            grants.access_token(CONNECTION, owner, client, within=WITHIN_SECONDS)
            for _ in range(count)
        )
    )
    print(json.dumps(sorted(set(tokens))))


async def main(mode: str) -> None:
    base = os.environ["GRANTS_SERVER"]
    store = SharedStore(
        StoreSettings(
            os.environ["GRANTS_STORE"],
            password=os.environ["GRANTS_STORE_PASSWORD"],
            deadline_seconds=0.5,
        )
    )
    await store.start()
    while not store.up:  # noqa: ASYNC110 (the store's probe marks it up: no event to wait on)
        await asyncio.sleep(0.01)
    guard = NetworkPolicy(["127.0.0.0/8"])
    client = GrantClient(
        TokenRequest(url=f"{base}/token", client_id=CLIENT_ID),
        os.environ["GRANTS_CLIENT_SECRET"],
        ("read",),
    )
    try:
        async with new_session(guard, tls_context()) as session:
            grants = FleetGrants(
                GrantStore(store, Shares(ShareSettings())),
                KeyringFile(Path(os.environ["GRANTS_KEYRING"])),
                TokenClient(session, guard, True),
            )
            if mode == "connect":
                for owner in _owners():
                    await _connect(grants, client, base, owner)
            elif mode == "burst":
                await _burst(grants, client)
            else:
                await _cycle(grants, client, base, session)
            await grants.close()
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
