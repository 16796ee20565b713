"""Where a proxied request's time goes: py-spy samples the proxy while wrk loads it (c=32).

Each sample's stack is read from its innermost frame outwards and counted for the first layer a
frame belongs to, so C work (llhttp parsing, a socket write) counts for the Python layer that
called it, and the standard library (``re``, ``json``, ``hmac``) for whoever called it. Idle
samples (the loop waiting in epoll) are not taken: the shares are of the CPU the proxy used. The
CPU per request is the proxy process's CPU time over the run divided by the requests wrk made.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from gatehouse_dev.processes import cpu_seconds

# The layers, in the order a frame is tried against them (the first whose marker is in the
# frame's file wins): the proxy's own modules last, so a library they call keeps its time.
# py-spy names a file from its package down (aiohttp/client.py, asyncio/base_events.py).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the scrubber (redaction of the injected secret)", ("gatehouse_contract/redaction.py",)),
    (
        "logging and metrics",
        (
            "logging/",
            "prometheus_client",
            "gatehouse_proxy/observation/logs.py",
            "gatehouse_proxy/observation/metrics.py",
        ),
    ),
    ("upstream client (aiohttp, yarl, multidict)", ("aiohttp/", "yarl/", "multidict/")),
    ("Starlette (routing, middleware, Request, responses)", ("starlette/",)),
    ("HTTP server (uvicorn, httptools' llhttp, ASGI)", ("uvicorn/", "httptools/")),
    ("Gatehouse's checks, tenancy and injection", ("gatehouse_proxy/", "gatehouse_contract/")),
    ("event loop and sockets (asyncio)", ("asyncio/", "selectors.py", "socket.py")),
)
OTHER = "other"
# Per second. Each sample stops the proxy for a moment (py-spy's --nonblocking reads code objects
# as they change, and crashes on Python 3.11's): rare enough not to bend what is measured.
SAMPLE_RATE = 100


def _layer(frame_file: str) -> str | None:
    for label, markers in LAYERS:
        if any(marker in frame_file for marker in markers):
            return label
    return None


def _frames(stack: str) -> list[tuple[str, str]]:
    """(function, file) per frame of a py-spy raw line's stack, outermost first."""
    found = []
    for frame in stack.split(";"):
        function, _, place = frame.rpartition(" (")
        found.append((function, place.rstrip(")").rpartition(":")[0]))
    return found


def attribute(raw: str) -> tuple[Counter[str], Counter[str]]:
    """Samples per layer, and per innermost Gatehouse or library function (for the reading)."""
    layers: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = _frames(stack)
        for function, frame_file in reversed(frames):
            label = _layer(frame_file)
            if label is not None:
                layers[label] += int(count)
                functions[f"{function} ({Path(frame_file).name})"] += int(count)
                break
        else:
            layers[OTHER] += int(count)
    return layers, functions


def profile(pid: int, load: Callable[[], dict[str, float]], seconds: float, keep: Path) -> str:
    """Samples ``pid`` while ``load`` (wrk) runs; the table of where its CPU went. The samples
    are kept in ``keep`` (py-spy's raw format, which flamegraph.pl and speedscope read)."""
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.unlink(missing_ok=True)
    sampler = subprocess.Popen(
        [
            # Installed beside this interpreter (gatehouse-dev depends on it).
            str(Path(sys.executable).with_name("py-spy")),
            "record",
            f"--pid={pid}",
            f"--rate={SAMPLE_RATE}",
            f"--duration={int(seconds)}",
            "--format=raw",
            f"--output={keep}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        before = cpu_seconds(pid)
        result = load()
        used = cpu_seconds(pid) - before
    finally:
        _, said = sampler.communicate(timeout=seconds + 30)
    if not keep.exists():
        return f"py-spy could not sample the proxy: {said.strip()[:2000]}"
    layers, functions = attribute(keep.read_text())
    requests = result["rps"] * seconds
    per_request_us = used / requests * 1e6
    total = sum(layers.values()) or 1
    lines = [
        f"CPU per request {per_request_us:.0f} µs ({used:.1f} s of CPU for {requests:,.0f} "
        f"requests at {result['rps']:,.0f} req/s), {total:,} samples (kept in {keep}):",
        "",
        "| layer | share of the proxy's CPU | µs per request |",
        "|---|---|---|",
    ]
    for label, count in layers.most_common():
        share = count / total
        lines.append(f"| {label} | {share:.0%} | {share * per_request_us:.0f} |")
    lines += ["", "Innermost frames that took the most (with the library code they called):", ""]
    lines += [f"- {name}: {count / total:.1%}" for name, count in functions.most_common(12)]
    return "\n".join(lines)
