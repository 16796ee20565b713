"""A real shared store on 127.0.0.1: Debian's ``redis-server``, configured as the chart's.

For the dev stack, the tests and the benchmarks: a password (the chart's store requires one), no
snapshots to disk (``persistent``: an append-only file, each write synced, as a store that keeps
grants across a restart needs), a memory bound with ``noeviction`` (a live counter is never
evicted: a full store refuses writes, which the proxies read as the store being unavailable)
and, like every server here, a log file and a bounded start.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path

import redis

from gatehouse_dev.processes import Server, free_port

REDIS_SERVER = "redis-server"


def binary() -> str:
    found = shutil.which(REDIS_SERVER) or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if found is None:
        raise RuntimeError(
            "redis-server is not installed (Debian: apt-get install redis-server; "
            "`make test` and `make up` install it as root)"
        )
    return found


@dataclass
class RedisServer:
    workdir: Path
    password: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    port: int = 0
    max_memory: str = "64mb"
    persistent: bool = False
    server: Server | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=self.port, password=self.password, socket_timeout=2
        )

    def _answers(self) -> bool:
        try:
            with self.client() as client:
                return bool(client.ping())
        except (redis.RedisError, OSError):
            return False

    def start(self, *, detached: bool = False, env: dict[str, str] | None = None) -> str:
        self.port = self.port or free_port()
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / f"redis-{self.port}.conf"
        # The password in a file of its own (0600), not on a command line every user can read.
        config.write_text(
            "\n".join(
                [
                    "bind 127.0.0.1",
                    f"port {self.port}",
                    f"dir {self.workdir}",
                    'save ""',
                    f"appendonly {'yes' if self.persistent else 'no'}",
                    "appendfsync always",
                    f"maxmemory {self.max_memory}",
                    "maxmemory-policy noeviction",
                    f"requirepass {self.password}",
                    "",
                ]
            )
        )
        config.chmod(0o600)
        self.server = Server(
            f"redis-{self.port}",
            [binary(), str(config)],
            self.workdir / "logs" / f"redis-{self.port}.log",
        )
        self.server.start(detached=detached, env=env or dict(os.environ))
        self.server.wait_until(self._answers, timeout=30)
        return self.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def pause(self) -> None:
        """Stops the server's process (SIGSTOP): connected clients wait, as on a hung store."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, number: signal.Signals) -> None:
        if self.server is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.server.pid, number)
