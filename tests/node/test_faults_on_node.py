"""Gatehouse on the node while things break: the operator's leader deleted and killed, webhook
Pods killed and evicted, the API server frozen. Each scenario runs with a client Pod fetching
through the proxy Service (20 requests a second) and writes through the admission webhook from
here (4 a second); the figures each prints are those in docs/development/dev-node.md, "The dev
node: the image and the chart as they ship".

Installed with the chart's defaults (two operator replicas, two webhook replicas, two proxies)
plus what the in-cluster test upstream needs. The tests run in file order, one release.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

import pytest

from gatehouse_contract.keyring import Keyring
from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from tests.node import pods
from tests.node.release import (
    CHART,
    CONNECTION,
    PROJECT,
    PROXY_URL,
    RELEASE,
    SYSTEM,
    TEST_UPSTREAM_VALUES,
    UPSTREAM_IP,
    helm,
    present_webhook_client,
    rollout,
)

pytestmark = pytest.mark.node

TOKEN_SECRET = "dataapp-dashboard-gatehouse"
KEYRING = f"{RELEASE}-keyring"
PROGRAMS = (b"gatehouse_operator", b"gatehouse_proxy")
REPORT = CHART.parents[1] / ".gatehouse" / "faults.txt"
# Two mounted-Secret updates (about a minute each, the kubelet's) and the switch between them.
ROTATION_SECONDS = 150.0
SOAK_SECONDS = float(os.environ.get("GATEHOUSE_SOAK_SECONDS", "600"))


def _report(figures: str) -> None:
    """Prints a scenario's figures and keeps them in REPORT (pytest shows no output of a test
    that passed; the table in docs/development/dev-node.md is made from this file)."""
    print(figures)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a") as report:
        report.write(figures.strip() + "\n")


def _pods(cluster: Cluster, component: str) -> list[dict[str, object]]:
    listed = json.loads(
        cluster.kubectl(
            "get", "pods", "-n", SYSTEM, "-l", f"app.kubernetes.io/component={component}",
            "-o", "json",
        ).stdout
    )  # fmt: skip
    return [pod for pod in listed["items"] if "deletionTimestamp" not in pod["metadata"]]


def _leader(cluster: Cluster) -> str:
    lease = json.loads(
        cluster.kubectl("get", "lease", f"{RELEASE}-operator", "-n", SYSTEM, "-o", "json").stdout
    )
    return str(lease["spec"].get("holderIdentity") or "")


def _ready(pod: dict[str, object]) -> bool:
    status: dict[str, object] = pod["status"]  # type: ignore[assignment]
    conditions: list[dict[str, str]] = status.get("conditions", [])  # type: ignore[assignment]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@dataclass
class Writes:
    """Changes the admission webhook must answer (an annotation on the DataApp, 4 a second),
    sent from here until stopped; counts the refused ones."""

    cluster: Cluster
    sent: int = 0
    refused: list[tuple[float, str]] = field(default_factory=list)  # (when, why)
    finished: threading.Event = field(default_factory=threading.Event)

    def _run(self) -> None:
        while not self.finished.is_set():
            done = self.cluster.kubectl(
                "annotate", "--overwrite", "-n", PROJECT, "dataapp/dashboard",
                f"gatehouse-test/write={self.sent}", check=False,
            )  # fmt: skip
            self.sent += 1
            if done.returncode != 0:
                self.refused.append((time.time(), done.stderr.strip()[:300]))
            time.sleep(0.25)

    def __enter__(self) -> Writes:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.finished.set()
        self.thread.join(timeout=30)


def _gone(cluster: Cluster, namespace: str) -> bool:
    return cluster.kubectl("get", "namespace", namespace, check=False).returncode != 0


def _client(cluster: Cluster, name: str, seconds: float) -> None:
    pods.apply(
        cluster,
        pods.client(PROJECT, name, url=PROXY_URL, token_secret=TOKEN_SECRET, seconds=seconds),
    )
    pods.wait_started(cluster, PROJECT, name)


def _fetches(cluster: Cluster, name: str, seconds: float) -> dict[str, object]:
    result = pods.summary(cluster, PROJECT, name, timeout=seconds + 120)
    result["failures"] = [
        line for line in pods.log_lines(cluster, PROJECT, name) if "failure" in line
    ]
    return result


def _routed_in(cluster: Cluster, name: str, since: float) -> float:
    """Applies connection and DataApp ``name`` and returns the seconds from ``since`` until the
    DataApp is Ready (every proxy replica routes it)."""
    document = f"""
apiVersion: gatehouse.dev/v1alpha1
kind: ExternalConnection
metadata: {{name: {name}}}
spec:
  displayName: {name}
  baseURL: http://upstream.upstream.svc.cluster.local
  linkPolicy: Builders
  auth: {{type: none}}
---
apiVersion: gatehouse.dev/v1alpha1
kind: DataApp
metadata: {{name: {name}}}
spec:
  connections: [{{alias: vendor, connection: {name}}}]
"""
    cluster.kubectl("apply", "-n", PROJECT, "-f", "-", stdin=document)
    cluster.kubectl(
        "wait", "-n", PROJECT, f"dataapp/{name}", "--for=condition=Ready", "--timeout=90s",
        timeout=100,
    )  # fmt: skip
    return time.time() - since


@pytest.fixture(scope="module")
def release(node: Cluster) -> Iterator[Cluster]:
    # The namespaces the file before deleted (its upstream's Service holds the fixed address).
    for namespace in ("upstream", PROJECT, SYSTEM):
        wait_for(partial(_gone, node, namespace), timeout=120, interval=1, what=f"{namespace} gone")
    node.kubectl("create", "namespace", "upstream")
    pods.apply(node, pods.upstream("upstream", UPSTREAM_IP))
    node.kubectl("create", "namespace", PROJECT)
    helm(
        node, "install", RELEASE, str(CHART), "-n", SYSTEM, "--create-namespace", "--wait",
        "--timeout=5m", *TEST_UPSTREAM_VALUES,
    )  # fmt: skip
    present_webhook_client(node)
    for component in ("operator", "webhook", "proxy"):
        rollout(node, component)
    node.kubectl("apply", "-n", PROJECT, "-f", "-", stdin=CONNECTION)
    node.kubectl(
        "wait", "-n", PROJECT, "dataapp/dashboard", "--for=condition=Ready", "--timeout=60s"
    )
    yield node
    helm(node, "uninstall", RELEASE, "-n", SYSTEM, "--wait", "--timeout=3m")
    for namespace in (PROJECT, "upstream", SYSTEM):
        node.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@dataclass
class Takeover:
    fetched: dict[str, object]
    writes: Writes
    routed: float  # seconds from the leader's end to a new connection routed


def _leader_ends(cluster: Cluster, name: str, end: Callable[[str], None]) -> Takeover:
    """Ends the leader with ``end`` (given its Pod's name) while a client fetches and writes
    go on, and applies a new connection right after."""
    leader = _leader(cluster)
    assert leader in {pod["metadata"]["name"] for pod in _pods(cluster, "operator")}  # type: ignore[index]
    _client(cluster, name, seconds=45)
    with Writes(cluster) as writes:
        time.sleep(3)
        ended = time.time()
        end(leader)
        routed = _routed_in(cluster, f"after-{name}", ended)
        time.sleep(3)
    fetched = _fetches(cluster, name, 45)
    for pod in _pods(cluster, "operator"):
        pod_name = str(pod["metadata"]["name"])  # type: ignore[index]
        logs = cluster.kubectl("logs", pod_name, "-n", SYSTEM, "--tail=400", check=False).stdout
        said = [
            line[:200]
            for line in logs.splitlines()
            if "gatehouse." in line and "aiohttp.access" not in line
        ]
        print(f"\n{pod_name}:\n" + "\n".join(said[:25]))
    _report(
        f"\n{name}: {fetched['ok']} fetches, {len(fetched['failures'])} failed; "  # type: ignore[arg-type]
        f"{writes.sent} writes, {len(writes.refused)} refused; a new connection routed "
        f"{routed:.1f}s after; now led by "
        f"{'the same Pod' if _leader(cluster) == leader else 'the standby'}"
    )
    return Takeover(fetched, writes, routed)


def test_a_deleted_operator_leader_is_replaced_in_seconds(release: Cluster) -> None:
    """Deleted as a drain or a rollout does: SIGTERM, and it releases the Lease."""

    def delete(pod: str) -> None:
        release.kubectl("delete", "pod", pod, "-n", SYSTEM, "--wait=false")

    takeover = _leader_ends(release, "leader-deleted", delete)
    assert takeover.fetched["failures"] == []
    assert takeover.writes.refused == []  # writes never wait on the operator: the webhook's own
    # Routing a new connection waits for the standby's cold start (it lists every resource and
    # publishes a first table) and for the proxies to find it behind the Service.
    assert takeover.routed < 15


def test_a_killed_operator_leader_is_replaced_in_seconds(release: Cluster) -> None:
    """SIGKILL to the leader's process: no SIGTERM, no release. Its container restarts, and the
    first replica to take the expired (or, to the restarted one, its own) Lease leads."""

    def kill(pod: str) -> None:
        os.kill(_process_of(pod), signal.SIGKILL)

    takeover = _leader_ends(release, "leader-killed", kill)
    assert takeover.fetched["failures"] == []
    assert takeover.writes.refused == []
    assert takeover.routed < 30
    rollout(release, "operator")


def _process(matches: Callable[[list[bytes], list[bytes]], bool], what: str) -> int:
    """The process whose argv and environment ``matches``, as this host sees it (the node's
    PID namespace nests in the host's)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
            with open(f"/proc/{entry}/environ", "rb") as environ:
                env = environ.read().split(b"\0")
        except OSError:
            continue
        if matches(argv, env):
            return int(entry)
    raise AssertionError(f"no process of {what}")


def _process_of(pod: str) -> int:
    """The Gatehouse program of ``pod`` (the container runtime names its host after the Pod)."""
    return _process(
        lambda argv, env: (
            any(program in argv for program in PROGRAMS) and f"HOSTNAME={pod}".encode() in env
        ),
        f"Pod {pod}",
    )


def test_webhook_pods_killed_and_evicted_refuse_no_write(release: Cluster) -> None:
    """A replica killed outright can fail the one call it was answering, or a call the Service
    sent it before withdrawing it (counted, and bounded to the seconds after the kill); a drain
    (the Eviction API; the replica stops gracefully, after the Service has withdrawn it) refuses
    nothing, and the PDB keeps one replica."""
    cluster = release
    with Writes(cluster) as writes:
        time.sleep(2)
        victim = str(_pods(cluster, "webhook")[0]["metadata"]["name"])  # type: ignore[index]
        killed = time.time()
        cluster.kubectl(
            "delete", "pod", victim, "-n", SYSTEM, "--grace-period=0", "--force", "--wait=false"
        )
        time.sleep(2)
        rollout(cluster, "webhook")
        wait_for(
            lambda: all(_ready(pod) for pod in _pods(cluster, "webhook")),
            timeout=60, interval=0.5, what="both webhook replicas ready",
        )  # fmt: skip
        sent_before_drain = writes.sent
        drained = time.time()
        # A drain evicts through the Eviction API: the PDB lets one go and holds the other.
        first, second = (str(p["metadata"]["name"]) for p in _pods(cluster, "webhook"))  # type: ignore[index]
        assert _evict(cluster, first).returncode == 0
        held = _evict(cluster, second)
        time.sleep(8)  # the evicted replica's graceful stop
        rollout(cluster, "webhook")
        time.sleep(2)
    after_kill = [when - killed for when, _ in writes.refused if when < drained]
    in_drain = [why for when, why in writes.refused if when >= drained]
    _report(
        f"\nwebhook killed: {sent_before_drain} writes, {len(after_kill)} refused "
        f"({', '.join(f'{at:.1f}s' for at in after_kill) or 'none'} after the kill); webhook "
        f"evicted: {writes.sent - sent_before_drain} writes, {len(in_drain)} refused"
    )
    assert held.returncode != 0
    assert "disruption budget" in held.stderr, held.stderr
    assert in_drain == []
    # At most the calls in flight on, or routed to, the killed replica before its withdrawal
    # (the API server gives a webhook call 10 s).
    assert len(after_kill) <= 2, writes.refused
    assert all(at < 15 for at in after_kill), writes.refused


def _evict(cluster: Cluster, pod: str) -> subprocess.CompletedProcess[str]:
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": SYSTEM},
    }
    return cluster.kubectl(
        "create", "--raw", f"/api/v1/namespaces/{SYSTEM}/pods/{pod}/eviction", "-f", "-",
        stdin=json.dumps(eviction), check=False,
    )  # fmt: skip


def _apiserver_pid(cluster: Cluster) -> int:
    """The node's kube-apiserver: the one whose certificates are in this node's folder."""
    where = str(cluster.kubeconfig.parent).encode()  # the node's folder: its kubeconfig's
    return _process(
        lambda argv, _: argv[0].endswith(b"kube-apiserver") and where in b" ".join(argv),
        f"the node's kube-apiserver in {where!r}",
    )


def _restarts(cluster: Cluster) -> dict[str, int]:
    return {
        str(pod["metadata"]["name"]): sum(  # type: ignore[index]
            status["restartCount"]
            for status in pod["status"]["containerStatuses"]  # type: ignore[index]
        )
        for component in ("operator", "webhook", "proxy")
        for pod in _pods(cluster, component)
    }


def test_the_api_server_frozen_for_30s_fails_no_fetch_and_loses_no_change(
    release: Cluster,
) -> None:
    cluster = release
    before = _restarts(cluster)
    _client(cluster, "api-frozen", seconds=70)
    time.sleep(3)
    # A change just before the outage: the upstream must receive the new key after it.
    rotated = "sk_node_rotated_before_the_outage"
    cluster.kubectl(
        "patch", "secret", "vendor-api", "-n", PROJECT, "-p",
        json.dumps({"stringData": {"api-key": rotated}}),
    )  # fmt: skip
    apiserver = _apiserver_pid(cluster)
    os.kill(apiserver, signal.SIGSTOP)
    try:
        time.sleep(30)
    finally:
        os.kill(apiserver, signal.SIGCONT)
    back = time.time()

    def received_rotated() -> bool:
        logs = cluster.kubectl("logs", "deployment/upstream", "-n", "upstream").stdout
        return any(json.loads(line).get("x-api-key") == rotated for line in logs.splitlines())

    wait_for(received_rotated, timeout=90, interval=1, what="the rotated key at the upstream")
    caught_up = time.time() - back
    fetched = _fetches(cluster, "api-frozen", 70)
    wait_for(lambda: bool(_leader(cluster)), timeout=60, interval=1, what="a leader")
    after = _restarts(cluster)
    restarted = {name: after[name] - before.get(name, 0) for name in after}
    for name, count in restarted.items():
        if count:
            previous = cluster.kubectl(
                "logs", name, "-n", SYSTEM, "--previous", "--tail=8", check=False
            ).stdout
            print(f"{name} restarted {count}x; its last lines before:\n{previous}")
    _report(
        f"\nAPI server frozen 30 s: {fetched['ok']} fetches, {len(fetched['failures'])} failed; "  # type: ignore[arg-type]
        f"the change made before it routed {caught_up:.1f}s after it came back; restarts "
        f"{restarted}"
    )
    assert fetched["failures"] == []
    # The leader that could not renew its Lease exits once (and stands by); nothing loops.
    assert all(count <= 1 for count in restarted.values()), restarted


def _keyring(cluster: Cluster) -> Keyring:
    data = cluster.kubectl(
        "get", "secret", KEYRING, "-n", SYSTEM, "-o", "jsonpath={.data.keyring\\.json}"
    ).stdout
    return Keyring.parse(base64.b64decode(data).decode())


def _put_keyring(cluster: Cluster, keyring: Keyring) -> None:
    patch = {"data": {"keyring.json": base64.b64encode(keyring.dump().encode()).decode()}}
    cluster.kubectl("patch", "secret", KEYRING, "-n", SYSTEM, "-p", json.dumps(patch))


def _mounted_everywhere(cluster: Cluster, keyring: Keyring) -> bool:
    """Whether every proxy Pod's mounted keyring is ``keyring`` (the kubelet updates a mounted
    Secret within about a minute)."""
    for pod in _pods(cluster, "proxy"):
        name = str(pod["metadata"]["name"])  # type: ignore[index]
        mounted = cluster.kubectl(
            "exec", name, "-n", SYSTEM, "--", "python", "-c",
            "print(open('/etc/gatehouse/keyring/keyring.json').read())", check=False,
        ).stdout  # fmt: skip
        if not mounted.strip() or Keyring.parse(mounted).dump() != keyring.dump():
            return False
    return True


def _readyz(cluster: Cluster, pod: str) -> dict[str, object]:
    """A proxy replica's /readyz, through the API server's Pod proxy."""
    raw = cluster.kubectl(
        "get", "--raw", f"/api/v1/namespaces/{SYSTEM}/pods/{pod}:9090/proxy/readyz"
    ).stdout
    found: dict[str, object] = json.loads(raw)
    return found


@pytest.mark.timeout(ROTATION_SECONDS + 180)
def test_keyring_rotation_under_load_fails_no_fetch(release: Cluster) -> None:
    """The three steps of docs/security/credentials.md, "Credentials at rest and in transit", on
    the node: add a key, make it active once every proxy has it, drop the old one once every
    table is signed and sealed with the new one."""
    cluster = release
    _client(cluster, "rotation", seconds=ROTATION_SECONDS)
    started = time.time()
    old = _keyring(cluster)
    added = old.with_new_key("k-node-next")
    _put_keyring(cluster, added)
    wait_for(
        partial(_mounted_everywhere, cluster, added), timeout=150, interval=5,
        what="the new key mounted in every proxy",
    )  # fmt: skip
    mounted = time.time() - started
    activated = added.activated("k-node-next")
    _put_keyring(cluster, activated)

    def on_the_new_key() -> bool:
        for pod in _pods(cluster, "proxy"):
            ready = _readyz(cluster, str(pod["metadata"]["name"]))  # type: ignore[index]
            if ready.get("signedWith") != "k-node-next" or ready.get("encryptedWith") != [
                "k-node-next"
            ]:
                return False
        return True

    wait_for(on_the_new_key, timeout=60, interval=1, what="every table on the new key")
    switched = time.time() - started
    final = activated.without(old.active)
    _put_keyring(cluster, final)
    wait_for(
        partial(_mounted_everywhere, cluster, final), timeout=150, interval=5,
        what="the old key gone from every proxy",
    )  # fmt: skip
    done = time.time() - started
    fetched = _fetches(cluster, "rotation", ROTATION_SECONDS)
    _report(
        f"\nkeyring rotated under load: {fetched['ok']} fetches, "
        f"{len(fetched['failures'])} failed; new key mounted after {mounted:.0f}s, every table "  # type: ignore[arg-type]
        f"on it after {switched:.0f}s, old key gone after {done:.0f}s"
    )
    assert fetched["failures"] == []
    assert done < ROTATION_SECONDS


def _rss_mb(pod: str) -> float:
    """Resident memory of the Gatehouse process of ``pod``, from /proc on this host."""
    with open(f"/proc/{_process_of(pod)}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pod}")


@pytest.mark.timeout(SOAK_SECONDS + 240)
def test_a_soak_at_steady_load_grows_no_program_and_keeps_p99(release: Cluster) -> None:
    """SOAK_SECONDS (default 10 minutes) at 20 fetches a second: each program's memory at the
    end against after the first minute (under 10 % growth), and every minute's p99."""
    cluster = release
    _client(cluster, "soak", seconds=SOAK_SECONDS)
    time.sleep(60)
    watched = [
        str(pod["metadata"]["name"])  # type: ignore[index]
        for component in ("operator", "webhook", "proxy")
        for pod in _pods(cluster, component)
    ]
    first = {pod: _rss_mb(pod) for pod in watched}
    fetched = _fetches(cluster, "soak", SOAK_SECONDS)
    last = {pod: _rss_mb(pod) for pod in watched}
    windows = [line for line in pods.log_lines(cluster, PROJECT, "soak") if "window" in line]
    growth = {pod: (last[pod] - first[pod]) / first[pod] for pod in watched}
    p99 = [float(w["p99_ms"]) for w in windows]
    _report(
        f"\nsoak {SOAK_SECONDS:.0f}s: {fetched['ok']} fetches, {len(fetched['failures'])} "  # type: ignore[arg-type]
        f"failed; RSS MB after 1 min -> end: "
        + ", ".join(f"{pod.rsplit('-', 2)[0]} {first[pod]:.0f}->{last[pod]:.0f}" for pod in watched)
        + f"; p99 per minute ms: {p99}"
    )
    assert fetched["failures"] == []
    assert all(share < 0.10 for share in growth.values()), growth
    # Steady: no minute's p99 more than 3x the median minute's.
    assert max(p99) < 3 * sorted(p99)[len(p99) // 2], p99
