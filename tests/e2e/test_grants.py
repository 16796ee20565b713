"""OAuth 2.0 grants refreshed once across the fleet, end to end: four worker processes (two
replicas of two workers, as far as grants go: tests/e2e/grant_worker.py) sharing a real
redis-server (persisted to an append-only file), and the dev authorization server on 127.0.0.1
with rotating refresh tokens and reuse detection (a retired refresh token used again revokes the
grant), a reuse interval, and a slowed refresh answer.

Every count of refreshes, reuses and revocations is what the authorization server saw.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from gatehouse_contract.keyring import Keyring
from gatehouse_dev.processes import Server, free_port, terminate_pid
from gatehouse_dev.redis_server import RedisServer
from tests.e2e.grant_worker import CLIENT_ID, REDIRECT

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
WORKERS = 4
# The issue asks 1,000; 200 keep this test near 30 s on the CI's two cores (GRANTS_CYCLES).
CYCLES = int(os.environ.get("GRANTS_CYCLES", "200"))
# Each refresh's answer is held this long after the rotation (the window a kill lands in).
REFRESH_DELAY_SECONDS = 0.05
# The provider's reuse interval: a worker killed between the rotation and the store's write is
# recovered by the next refresh within it. That refresh waits for the killed worker's lock to
# lapse (the token request's deadline and a second), and at the end for the store's restart too:
# 10 s lost the grant when the last kill landed there (the docs ask a provider for 15 s or more).
REUSE_SECONDS = 20


@dataclass
class Grants:
    workdir: Path
    store: RedisServer
    server: Server
    base: str
    secret: str = field(default_factory=lambda: "cs_" + secrets.token_urlsafe(24))
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def register(self, lifetime: float, delay: float = REFRESH_DELAY_SECONDS) -> None:
        client = {
            "id": CLIENT_ID,
            "secret": self.secret,
            "method": "basic",
            "lifetime": lifetime,
            "redirectUris": [REDIRECT],
            "refreshReuseSeconds": REUSE_SECONDS,
            "refreshDelaySeconds": delay,
        }
        httpx.post(f"{self.base}/clients", json=client, timeout=5).raise_for_status()

    def env(self, owners: list[str], **settings: str) -> dict[str, str]:
        return {
            **os.environ,
            "GRANTS_SERVER": self.base,
            "GRANTS_STORE": self.store.url,
            "GRANTS_STORE_PASSWORD": self.store.password,
            "GRANTS_KEYRING": str(self.workdir / "keyring.json"),
            "GRANTS_CLIENT_SECRET": self.secret,
            "GRANTS_OWNERS": ",".join(owners),
            **settings,
        }

    def start(self, mode: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        worker = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.grant_worker", mode],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
        )
        self.workers.append(worker)
        return worker

    def run(self, mode: str, env: dict[str, str], timeout: float = 60) -> str:
        worker = self.start(mode, env)
        out, _ = worker.communicate(timeout=timeout)
        assert worker.returncode == 0, f"{mode} failed"
        return out.decode()

    def stats(self) -> dict[str, Any]:
        answer: dict[str, Any] = httpx.get(f"{self.base}/stats", timeout=5).json()
        return answer


@pytest.fixture
def grants(tmp_path: Path) -> Iterator[Grants]:
    (tmp_path / "keyring.json").write_text(Keyring.generate("k1").dump())
    store = RedisServer(tmp_path / "store", persistent=True)
    store.start()
    port = free_port()
    server = Server(
        f"authorization-server-{port}",
        [sys.executable, "-m", "gatehouse_dev.token_endpoint", f"--port={port}"],
        tmp_path / "logs" / "authorization-server.log",
    )
    server.start(detached=False)
    base = f"http://127.0.0.1:{port}"
    server.wait_until(lambda: _answers(base), timeout=30)
    setup = Grants(tmp_path, store, server, base)
    try:
        yield setup
    finally:
        for worker in setup.workers:
            if worker.poll() is None:
                terminate_pid(worker.pid)
            worker.wait(timeout=10)
            if worker.stdout is not None:
                worker.stdout.close()
        server.stop()
        store.stop()


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/stats", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_200_concurrent_requests_of_one_viewer_at_the_expiry_make_one_refresh(
    grants: Grants,
) -> None:
    grants.register(lifetime=2, delay=0.2)
    owners = ["issuer|ada"]
    grants.run("connect", grants.env(owners))
    connected = time.time()
    # Four workers, 50 requests each, all at once, once the access token has expired.
    at = str(max(connected + 2.5, time.time() + 3))
    env = grants.env(owners, GRANTS_AT=at, GRANTS_COUNT="50")
    bursts = [grants.start("burst", env) for _ in range(WORKERS)]
    tokens: set[str] = set()
    for burst in bursts:
        out, _ = burst.communicate(timeout=60)
        assert burst.returncode == 0
        tokens |= set(json.loads(out))
    stats = grants.stats()
    assert stats["refreshes"] == 1, stats
    assert len(tokens) == 1
    assert (stats["reuseDetections"], stats["revokedGrants"]) == (0, 0)


def test_expiry_cycles_with_workers_killed_mid_refresh_revoke_no_grant_and_survive_a_restart(
    grants: Grants,
) -> None:
    grants.register(lifetime=0.3)
    owners = ["issuer|ada", "issuer|bob", "issuer|cyd", "issuer|dee"]
    grants.run("connect", grants.env(owners))
    out = grants.workdir / "refused.jsonl"
    out.touch()
    env = grants.env(owners, GRANTS_UNTIL=str(time.time() + 300), GRANTS_OUT=str(out))
    workers = [grants.start("cycle", env) for _ in range(WORKERS)]
    started, kills = time.monotonic(), 0
    rng = random.Random(49)  # noqa: S311 (when to kill, not a secret)
    while grants.stats()["refreshes"] < CYCLES:
        assert time.monotonic() - started < 240, grants.stats()
        time.sleep(rng.uniform(0.2, 0.8))
        # A worker killed at a random moment: a refresh is in flight most of the time (each
        # answer is held after the rotation), so many kills land mid-refresh.
        victim = rng.randrange(WORKERS)
        workers[victim].send_signal(signal.SIGKILL)
        workers[victim].wait()
        kills += 1
        workers[victim] = grants.start("cycle", env)
    elapsed = time.monotonic() - started
    for worker in workers:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    stats = grants.stats()
    refused = [json.loads(line) for line in out.read_text().splitlines()]
    counts: Counter[str] = Counter()
    for counted in grants.workdir.glob("refused-*.counts"):
        counts.update(json.loads(counted.read_text()))
    print(
        f"{stats['refreshes']} refreshes in {elapsed:.1f}s, {kills} workers killed, "
        f"{stats['reuseIntervalAnswers']} recovered by the reuse interval; counts {dict(counts)}"
    )
    assert (stats["revokedGrants"], stats["reuseDetections"]) == (0, 0), stats
    asked_to_connect = [r for r in refused if r["what"] == "viewer_authorization_required"]
    assert asked_to_connect == []
    assert [r for r in refused if r["what"] == "another_owners_token"] == []
    assert counts["ok"] > CYCLES

    # The store restarted (its append-only file kept): every grant is still there, and
    # refreshes.
    grants.store.stop()
    grants.store.start()
    check = grants.env(owners, GRANTS_UNTIL=str(time.time() + 2), GRANTS_OUT=str(out))
    before = len(out.read_text().splitlines())
    grants.run("cycle", check)
    after = [json.loads(line) for line in out.read_text().splitlines()[before:]]
    assert [r for r in after if r["what"] == "viewer_authorization_required"] == []
    assert grants.stats()["revokedGrants"] == 0
    assert grants.stats()["refreshes"] > stats["refreshes"]
