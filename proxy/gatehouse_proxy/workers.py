"""Several proxy processes in one Pod (``--workers N``), so that a Pod can use more than one core.

A Python process serves from one core. With ``N`` workers, this process supervises ``N`` copies
of the one-process proxy, each a replica in every respect but its port: the supervisor binds the
app port once and every worker accepts from that one socket, inherited (the kernel hands each
new connection to one worker waiting on it); each follows the table channel as a replica of its
own (``<pod>-w<index>``) and keeps its own tenant accounting, so every per-replica limit applies
per worker (docs/operating/workers.md, "Workers: more than one core per Pod"). The socket has no
``SO_REUSEPORT``: with it, any process of the same user could bind the port too and take a share
of the apps' connections, and their tokens.
The supervisor serves the Pod's readiness and metrics from its workers' (over a Unix socket
each), restarts a worker that dies, and on SIGTERM passes the signal on and waits for the workers
to finish what is in flight.
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


def shared_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """The app port's listening socket, for the workers to inherit. No other socket may bind
    the port while it is open (EADDRINUSE): SO_REUSEADDR only lets a restarted Pod bind past
    its old connections' TIME_WAIT."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def _die_with_supervisor() -> None:
    """A worker ends when its supervisor does, even if the supervisor was killed."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Worker:
    def __init__(self, index: int, argv: list[str], admin_socket: Path, listener: int) -> None:
        self.index = index
        self.argv = argv
        self.admin_socket = admin_socket
        self.listener = listener  # the app port's socket, passed on as this descriptor
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.admin_socket.unlink(missing_ok=True)
        self.process = await asyncio.create_subprocess_exec(
            *self.argv, preexec_fn=_die_with_supervisor, pass_fds=(self.listener,)
        )

    def signal(self, number: int) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(number)


class Supervisor:
    """Starts the workers, starts again any that dies, and stops them all on request."""

    def __init__(self, workers: list[Worker], listener: socket.socket) -> None:
        self.workers = workers
        self.listener = listener
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
        # Once the workers stop accepting, the port refuses new connections, as a one-process
        # proxy's does, instead of queueing them for nobody.
        self.listener.close()


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
    ``encryptedWith`` covers every worker's, so a key rotation waits for all of them, and its
    ``store`` is that of a worker counting alone, if one is."""
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
    encrypted = sorted({key for worker in workers for key in _strings(worker.get("encryptedWith"))})
    summary = {key: laggard[key] for key in ("tableVersion", "connections", "apps", "signedWith")}
    age = max(float(str(worker["tableAgeSeconds"])) for worker in workers)
    # The Pod counts with the fleet only if every worker does: the first that does not speaks.
    stores = [store for worker in workers if isinstance(store := worker.get("store"), dict)]
    alone = [store for store in stores if store.get("counting") != "shared"]
    return 200, {
        "ready": True,
        **summary,
        "tableAgeSeconds": age,
        "encryptedWith": encrypted,
        # Deprecated alias of encryptedWith (see admin.py); goes in 0.3.0.
        "sealedWith": encrypted,
        "store": alone[0] if alone else stores[0] if stores else {},
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


def worker_argv(argv: list[str], index: int, admin_socket: Path, listener: int) -> list[str]:
    """This command line, for worker ``index``, which accepts on the descriptor ``listener``."""
    return [
        sys.executable,
        "-m",
        "gatehouse_proxy",
        *argv,
        f"--worker={index}:{admin_socket}",
        f"--listen-fd={listener}",
    ]
