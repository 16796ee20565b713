"""``make bench``'s workers section: how a 2-worker proxy Pod spreads connections over its
workers, and what it serves, with each request on a connection kept open and on a new one.

wrk (32 connections) fetches through the supervisor's port; each worker's request counter (the
supervisor's /metrics, labelled by worker) says which worker served how many. Kept-open
connections are spread once, when they are accepted; with ``Connection: close`` every request is
a new accept, the spread of accepts itself.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

CONNECTIONS = 32
ROUNDS = 3
ROUND_SECONDS = 4
MODES = {"kept open": {}, "new each request": {"Connection": "close"}}

Wrk = Callable[[str, int, dict[str, str], int, int], dict[str, float]]


@dataclass(frozen=True)
class Round:
    rps: float
    p50: float
    p99: float
    shares: tuple[float, ...]  # of the round's requests, per worker


def served_by_worker(admin_url: str) -> dict[str, float]:
    """Requests each worker has served, from the supervisor's metrics."""
    text = httpx.get(f"{admin_url}/metrics", timeout=5).text
    served: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "gatehouse_proxy_requests":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    worker = sample.labels["worker"]
                    served[worker] = served.get(worker, 0) + sample.value
    return served


def measure(url: str, admin_url: str, token: str, wrk: Wrk) -> dict[str, list[Round]]:
    rounds: dict[str, list[Round]] = {}
    for _ in range(ROUNDS):
        for mode, extra in MODES.items():
            before = served_by_worker(admin_url)
            headers = {"Authorization": f"Bearer {token}", **extra}
            result = wrk(url, CONNECTIONS, headers, 0, ROUND_SECONDS)
            after = served_by_worker(admin_url)
            counts = [after[w] - before.get(w, 0) for w in sorted(after)]
            total = sum(counts) or 1
            shares = tuple(count / total for count in counts)
            rounds.setdefault(mode, []).append(
                Round(result["rps"], result["p50"], result["p99"], shares)
            )
    return rounds


def table(rounds: dict[str, list[Round]]) -> str:
    """Medians over the rounds; the spread as each worker's share, and the most uneven round."""
    lines = [
        "| connections | req/s | p50 ms | p99 ms | share per worker (mean) | most uneven round |",
        "|---|---|---|---|---|---|",
    ]
    for mode, measured in rounds.items():
        workers = len(measured[0].shares)
        mean = [statistics.mean(r.shares[w] for r in measured) for w in range(workers)]
        worst = max(measured, key=lambda r: max(r.shares) - min(r.shares))
        lines.append(
            f"| {CONNECTIONS}, {mode} | {statistics.median(r.rps for r in measured):,.0f} "
            f"| {statistics.median(r.p50 for r in measured):.2f} "
            f"| {statistics.median(r.p99 for r in measured):.2f} "
            f"| {' / '.join(f'{share:.0%}' for share in mean)} "
            f"| {' / '.join(f'{share:.0%}' for share in worst.shares)} |"
        )
    return "\n".join(lines)
