"""Where a proxied request's time goes: py-spy samples the proxy while wrk loads it (c=32).

Each sample's stack is read from its innermost frame outwards and counted for the first layer a
frame belongs to, so C work (llhttp parsing, a socket write) counts for the Python layer that
called it, and the standard library (``re``, ``json``, ``hmac``) for whoever called it. Idle
samples (the loop waiting in epoll) are not taken: the shares are of the CPU the proxy used. The
CPU per request is the proxy process's CPU time over the run divided by the requests wrk made.

The same samples are read a second way, by the step of a fetch a frame's module serves (the step
table, :data:`STEPS`): what the door, the rules, the limits, the credential, the upstream call,
the scrubber and the observers each cost a request, beside what the server and the event loop
cost, which the stack's floor (gatehouse_dev.floor_passthrough) pays as well.
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

# The step table: which step of a fetch each module serves, tried from a sample's innermost frame
# outwards; the first frame whose file holds a marker gives the step. Libraries a step alone uses
# (aiohttp for the upstream, cryptography for the credential, prometheus_client for the
# observers) are the step's; the standard library (asyncio's futures and locks, re, hmac) is
# transparent: it counts for the step that called it. The proxy's modules are named by their
# rooms (the steps follow them: a step's modules are listed before a wider room's marker): this
# mapping is the one place to update when a module moves or a room is added.
SERVER_AND_LOOP = "server and event loop (uvicorn, httptools, uvloop: the floor pays it too)"
STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "door (parsing's deadline, the app told from its token, the first turn)",
        (
            "gatehouse_contract/request_deadline.py",
            "gatehouse_contract/routes.py",
            "gatehouse_proxy/door/entrance.py",
            "gatehouse_proxy/door/incoming.py",
            "gatehouse_proxy/door/fetch_endpoint.py",
            "gatehouse_proxy/passage/routing.py",
            "gatehouse_proxy/table/",
            "gatehouse_proxy/errors.py",
        ),
    ),
    (
        "cache (the answer's key, looked up and read, kept, sent: the store's calls are the "
        "limits', its decryption the credential's)",
        (
            "gatehouse_proxy/caching/",
            "gatehouse_proxy/passage/cached.py",
            "gatehouse_proxy/door/cached_answer.py",
            "gatehouse_proxy/store/answer_store.py",
            "gatehouse_proxy/http/cache_control.py",
        ),
    ),
    (
        "rules (method, path, query, headers, body, answer type)",
        (
            "gatehouse_contract/header_names.py",
            "gatehouse_proxy/rules/",
            "gatehouse_proxy/http/media_types.py",
        ),
    ),
    (
        "limits (tenant caps and turns, quotas, vendor pauses, the shared store)",
        (
            "redis/",
            "gatehouse_proxy/limits/",
            "gatehouse_proxy/store/",
            "gatehouse_proxy/passage/vendor_pause.py",
            "gatehouse_proxy/http/retry_after.py",
        ),
    ),
    (
        "credential (opened from the table, injected; tokens minted)",
        (
            "cryptography/",
            "gatehouse_contract/keyring.py",
            "gatehouse_proxy/credentials/",
            "gatehouse_proxy/passage/refused_tokens.py",
        ),
    ),
    (
        "upstream (the call: aiohttp, yarl, multidict; the network guard)",
        (
            "aiohttp/",
            "yarl/",
            "multidict/",
            "propcache/",
            "aiohappyeyeballs/",
            "gatehouse_proxy/upstream/",
            "gatehouse_proxy/passage/sending.py",
            "gatehouse_proxy/http/content_coding.py",
        ),
    ),
    (
        "scrub and relay (the answer's headers and body, sent to the app)",
        (
            "gatehouse_contract/redaction.py",
            "gatehouse_contract/sent_forms.py",
            "gatehouse_proxy/door/relay.py",
        ),
    ),
    (
        "observers (metrics, tracing, inspector, usage, audit, logs)",
        (
            "logging/",
            "prometheus_client/",
            "opentelemetry/",
            "gatehouse_contract/activity.py",
            "gatehouse_proxy/observation/",
        ),
    ),
    # What is left of the proxy: the function that runs the steps in order, and the wiring.
    (
        "the fetch's own order (passage/steps.py, the composition)",
        ("gatehouse_proxy/", "gatehouse_contract/"),
    ),
    (SERVER_AND_LOOP, ("uvicorn/", "httptools/", "uvloop/", "starlette/")),
)
# Frames that count for the step below them, or for the loop when nothing is below (the loop's
# own callbacks).
TRANSPARENT_THEN_LOOP = ("asyncio/", "selectors.py", "socket.py")
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


def steps(raw: str) -> Counter[str]:
    """Samples per step of a fetch (see :data:`STEPS`)."""
    counted: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = _frames(stack)
        found = OTHER
        for _, frame_file in reversed(frames):
            step = next((s for s, markers in STEPS if any(m in frame_file for m in markers)), None)
            if step is not None:
                found = step
                break
            if found == OTHER and any(marker in frame_file for marker in TRANSPARENT_THEN_LOOP):
                found = SERVER_AND_LOOP
        counted[found] += int(count)
    return counted


def step_table(counted: Counter[str], per_request_us: float) -> str:
    """CPU µs per request per step, in the order of a fetch."""
    total = sum(counted.values()) or 1
    lines = ["| step | share of the proxy's CPU | µs per request |", "|---|---|---|"]
    for label in [step for step, _ in STEPS] + [OTHER]:
        share = counted[label] / total
        lines.append(f"| {label} | {share:.0%} | {share * per_request_us:.0f} |")
    return "\n".join(lines)


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
    raw = keep.read_text()
    layers, functions = attribute(raw)
    requests = result["rps"] * seconds
    per_request_us = used / requests * 1e6
    total = sum(layers.values()) or 1
    lines = [
        f"CPU per request {per_request_us:.0f} µs ({used:.1f} s of CPU for {requests:,.0f} "
        f"requests at {result['rps']:,.0f} req/s), {total:,} samples (kept in {keep}).",
        "",
        "By step of a fetch (see bench_profile.STEPS):",
        "",
        step_table(steps(raw), per_request_us),
        "",
        "By layer of code:",
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
