"""The dev node: Pods run, find Services by name, reach the API server; the host is untouched."""

from __future__ import annotations

import json

import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from tests.node import pods
from tests.node.conftest import host_state

pytestmark = pytest.mark.node

PROBE = """
import json, socket
address = socket.gethostbyname("kubernetes.default.svc.cluster.local")
socket.create_connection((address, 443), timeout=5).close()
token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()
print(json.dumps({"address": address, "token": bool(token)}))
"""


def test_a_pod_finds_the_api_server_by_name_and_has_a_token(
    node: Cluster, host_before: dict[str, str]
) -> None:
    node.kubectl("create", "namespace", "probe")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": "probe"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": pods.SECURITY,
            "containers": [
                {
                    "name": "probe",
                    "image": pods.IMAGE,
                    "imagePullPolicy": "Never",
                    "args": ["python", "-c", PROBE],
                }
            ],
        },
    }
    pods.apply(node, [pod])

    def finished() -> str | None:
        done = node.kubectl(
            "get", "pod", "probe", "-n", "probe", "-o", "jsonpath={.status.phase}", check=False
        )
        return done.stdout if done.stdout in ("Succeeded", "Failed") else None

    assert wait_for(finished, timeout=90, interval=0.5, what="the probe Pod") == "Succeeded"
    result = json.loads(node.kubectl("logs", "probe", "-n", "probe").stdout)
    assert result == {"address": "10.96.0.1", "token": True}
    assert host_state(node_running=True) == host_before, "the running node changed the host"
