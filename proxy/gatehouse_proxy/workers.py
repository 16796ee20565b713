"""Several proxy processes in one Pod (``--workers N``), so that a Pod can use more than one core.

A Python process serves from one core. With ``N`` workers, this process supervises ``N`` copies
of the one-process proxy, each a replica in every respect but its port: each binds the app port
with ``SO_REUSEPORT`` (the kernel spreads new connections over them), follows the table channel
as a replica of its own (``<pod>-w<index>``) and keeps its own tenant accounting, so every
per-replica limit applies per worker (README, "Workers"). The supervisor serves the Pod's
readiness and metrics from its workers' (over a Unix socket each), restarts a worker that dies,
and on SIGTERM passes the signal on and waits for the workers to finish what is in flight.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import signal
import socket
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import aiohttp
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

log = logging.getLogger("gatehouse.proxy.workers")

# A worker that dies is started again after this long, doubled while it keeps dying (to 30 s).
RESTART_SECONDS = 0.5
_MAX_RESTART_SECONDS = 30.0
# How long a worker that started has to live before its next death is not a crash loop.
_STEADY_SECONDS = 10.0
_ADMIN_TIMEOUT = aiohttp.ClientTimeout(total=2)
_PR_SET_PDEATHSIG = 1


def reuse_port_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening socket that other processes of this user may bind to the same port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock


def _die_with_supervisor() -> None:
    """A worker ends when its supervisor does, even if the supervisor was killed."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Worker:
    def __init__(self, index: int, argv: list[str], admin_socket: Path) -> None:
        self.index = index
        self.argv = argv
        self.admin_socket = admin_socket
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.admin_socket.unlink(missing_ok=True)
        self.process = await asyncio.create_subprocess_exec(
            *self.argv, preexec_fn=_die_with_supervisor
        )

    def signal(self, number: int) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(number)


class Supervisor:
    """Starts the workers, starts again any that dies, and stops them all on request."""

    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers
        self.stopping = asyncio.Event()

    async def run(self) -> None:
        await asyncio.gather(*(self._keep(worker) for worker in self.workers))

    async def _keep(self, worker: Worker) -> None:
        delay = RESTART_SECONDS
        loop = asyncio.get_running_loop()
        while not self.stopping.is_set():
            started = loop.time()
            await worker.start()
            assert worker.process is not None
            code = await worker.process.wait()
            if self.stopping.is_set():
                return
            if loop.time() - started >= _STEADY_SECONDS:
                delay = RESTART_SECONDS
            log.error(
                "proxy worker %d exited (code %d); starting it again in %.1fs",
                worker.index,
                code,
                delay,
            )
            try:
                await asyncio.wait_for(self.stopping.wait(), delay)
            except TimeoutError:
                delay = min(delay * 2, _MAX_RESTART_SECONDS)

    def stop(self) -> None:
        """Each worker drains what it has in flight, as a one-process proxy does on SIGTERM."""
        self.stopping.set()
        for worker in self.workers:
            worker.signal(signal.SIGTERM)


async def _ask(worker: Worker, path: str) -> tuple[int, str]:
    """A worker's admin answer, or (0, "") when it does not give one."""
    connector = aiohttp.UnixConnector(path=str(worker.admin_socket))
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=_ADMIN_TIMEOUT) as client,
            client.get(f"http://worker{path}") as reply,
        ):
            return reply.status, await reply.text()
    except (aiohttp.ClientError, TimeoutError, OSError):
        return 0, ""


def pod_readiness(answers: list[tuple[int, str]]) -> tuple[int, dict[str, object]]:
    """The Pod is ready when every worker is. Its table is its laggard's (the lowest version),
    and ``sealedWith`` covers every worker's, so a key rotation waits for all of them."""
    workers: list[dict[str, object]] = []
    for index, (status, text) in enumerate(answers):
        try:
            answer = json.loads(text) if text else {}
        except ValueError:
            answer = {}
        if not isinstance(answer, dict) or not answer:
            answer = {"ready": False, "reason": "the worker does not answer"}
        workers.append({"worker": index, **answer, "ready": status == 200 and answer.get("ready")})
    if not all(worker["ready"] for worker in workers):
        reasons = sorted({str(w.get("reason", "")) for w in workers if not w["ready"]})
        return 503, {"ready": False, "reason": "; ".join(reasons), "workers": workers}
    laggard = min(workers, key=lambda worker: int(str(worker["tableVersion"])))
    sealed = sorted({key for worker in workers for key in _strings(worker.get("sealedWith"))})
    summary = {key: laggard[key] for key in ("tableVersion", "connections", "apps", "signedWith")}
    age = max(float(str(worker["tableAgeSeconds"])) for worker in workers)
    return 200, {
        "ready": True,
        **summary,
        "tableAgeSeconds": age,
        "sealedWith": sealed,
        "workers": workers,
    }


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


class _Families:
    """Metric families parsed from the workers' expositions, each sample labelled by worker."""

    def __init__(self, texts: Iterable[tuple[int, str]]) -> None:
        self.texts = list(texts)

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for index, text in self.texts:
            for family in text_string_to_metric_families(text):
                into = merged.setdefault(
                    family.name, Metric(family.name, family.documentation, family.type)
                )
                into.samples += [
                    Sample(s.name, {**s.labels, "worker": str(index)}, s.value, s.timestamp)
                    for s in family.samples
                ]
        yield from merged.values()


def pod_metrics(texts: Iterable[tuple[int, str]]) -> bytes:
    """One exposition of every worker's series, told apart by a ``worker`` label."""
    registry = CollectorRegistry()
    registry.register(_Families(texts))
    return generate_latest(registry)


def create_supervisor_admin_app(workers: list[Worker]) -> Starlette:
    """The Pod's readiness and metrics, made from its workers'."""

    async def ask_all(path: str) -> list[tuple[int, str]]:
        return list(await asyncio.gather(*(_ask(worker, path) for worker in workers)))

    async def readyz(request: Request) -> Response:
        status, body = pod_readiness(await ask_all("/readyz"))
        return JSONResponse(body, status_code=status)

    async def metrics(request: Request) -> Response:
        answers = await ask_all("/metrics")
        texts = [(index, text) for index, (status, text) in enumerate(answers) if status == 200]
        return Response(pod_metrics(texts), media_type=CONTENT_TYPE_LATEST)

    return Starlette(routes=[Route("/readyz", readyz), Route("/metrics", metrics)])


def worker_argv(argv: list[str], index: int, admin_socket: Path) -> list[str]:
    """This command line, for worker ``index``."""
    return [sys.executable, "-m", "gatehouse_proxy", *argv, f"--worker={index}:{admin_socket}"]
