"""What a Pod with several workers says of itself: readiness and metrics made from its workers'.
(The processes themselves are tested end to end in tests/e2e/test_proxy_workers.py.)"""

from __future__ import annotations

import errno
import json
import socket

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gatehouse_proxy.workers import pod_metrics, pod_readiness, shared_socket


def _ready(version: int, signed: str, encrypted: list[str], age: float) -> tuple[int, str]:
    answer = {
        "ready": True,
        "tableVersion": version,
        "connections": version * 10,
        "apps": version,
        "tableAgeSeconds": age,
        "signedWith": signed,
        "encryptedWith": encrypted,
        "feed": {"connected": True},
    }
    return 200, json.dumps(answer)


def test_the_pod_is_ready_when_every_worker_is_and_speaks_for_its_laggard() -> None:
    status, body = pod_readiness([_ready(7, "k2", ["k2"], 1.0), _ready(6, "k1", ["k1"], 9.5)])
    assert status == 200
    assert body["tableVersion"] == 6
    assert body["signedWith"] == "k1"
    # A rotation may drop k1 only once no worker encrypts with it.
    assert body["encryptedWith"] == ["k1", "k2"]
    # The deprecated alias says the same until it goes.
    assert body["sealedWith"] == ["k1", "k2"]
    assert body["tableAgeSeconds"] == 9.5
    workers = body["workers"]
    assert isinstance(workers, list)
    assert [worker["worker"] for worker in workers] == [0, 1]


def test_a_worker_without_a_table_or_an_answer_makes_the_pod_unready() -> None:
    unfed = (503, json.dumps({"ready": False, "reason": "no routing table yet"}))
    status, body = pod_readiness([_ready(3, "k1", ["k1"], 1.0), unfed, (0, "")])
    assert status == 503
    assert body["ready"] is False
    assert body["reason"] == "no routing table yet; the worker does not answer"


def test_metrics_of_every_worker_are_one_exposition_with_a_worker_label() -> None:
    texts = []
    for index, count in enumerate((3, 5)):
        registry = CollectorRegistry()
        requests = Counter("gatehouse_proxy_requests", "Requests.", ["code"], registry=registry)
        requests.labels("ok").inc(count)
        texts.append((index, generate_latest(registry).decode()))
    merged = pod_metrics(texts).decode()
    [family] = [f for f in text_string_to_metric_families(merged) if f.name.endswith("requests")]
    totals = {
        sample.labels["worker"]: sample.value
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert totals == {"0": 3.0, "1": 5.0}
    assert merged.count("# HELP gatehouse_proxy_requests_total") == 1


@pytest.mark.parametrize("reuse_port", [False, True])
def test_no_other_socket_binds_the_shared_port(reuse_port: bool) -> None:
    """Not even one of the same user asking for SO_REUSEPORT (which would take a share of the
    apps' connections, and their tokens)."""
    with shared_socket("127.0.0.1", 0) as shared:
        port = shared.getsockname()[1]
        with socket.socket() as other:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            with pytest.raises(OSError, match="in use") as refused:
                other.bind(("127.0.0.1", port))
            assert refused.value.errno == errno.EADDRINUSE
