"""The control plane is real: CRDs, schema validation, watches and RBAC behave as in a cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import pytest
import yaml
from kubernetes import client, config, watch

from gatehouse_dev.cluster import NOBODY, Cluster

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "probe.gatehouse.dev", "v1", "widgets"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "maximum": 10}
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture(scope="module")
def widgets(cluster: Cluster) -> Iterator[client.CustomObjectsApi]:
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(WIDGET_CRD))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{PLURAL}.{GROUP}", "--timeout=30s")
    with config.new_client_from_config(config_file=str(cluster.kubeconfig)) as api:
        yield client.CustomObjectsApi(api)


def widget(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size},
    }


def test_server_reports_the_pinned_version(cluster: Cluster) -> None:
    reported = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert reported["serverVersion"]["gitVersion"] == cluster.binaries.versions.kubernetes
    assert reported["clientVersion"]["gitVersion"] == cluster.binaries.versions.kubernetes


def test_custom_resource_is_created_and_watched(
    widgets: client.CustomObjectsApi, namespace: str
) -> None:
    listing = cast(
        dict[str, Any], widgets.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    )
    since = listing["metadata"]["resourceVersion"]
    widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, widget("w1", 3))
    widgets.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "w1", {"spec": {"size": 4}}
    )

    seen: list[tuple[str, int]] = []
    stream = watch.Watch().stream(
        widgets.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        resource_version=since,
        timeout_seconds=10,
    )
    for event in stream:
        seen.append((event["type"], event["object"]["spec"]["size"]))
        if len(seen) == 2:
            break
    assert seen == [("ADDED", 3), ("MODIFIED", 4)]


def test_schema_validation_is_enforced(cluster: Cluster, widgets: object, namespace: str) -> None:
    done = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(widget("big", 11)), check=False
    )
    assert done.returncode != 0
    assert "spec.size" in done.stderr
    assert "should be less than or equal to 10" in done.stderr


def test_user_without_rights_is_forbidden(
    cluster: Cluster, widgets: object, namespace: str
) -> None:
    denied = cluster.kubectl("get", PLURAL, "-n", namespace, as_user=NOBODY, check=False)
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr
    assert f'User "{NOBODY.name}" cannot list resource "{PLURAL}"' in denied.stderr


def test_a_role_binding_grants_the_same_user_access(
    cluster: Cluster, widgets: object, namespace: str
) -> None:
    cluster.kubectl(
        "create",
        "role",
        "widget-reader",
        "-n",
        namespace,
        "--verb=get,list",
        f"--resource={PLURAL}.{GROUP}",
    )
    cluster.kubectl(
        "create",
        "rolebinding",
        "widget-reader",
        "-n",
        namespace,
        "--role=widget-reader",
        f"--user={NOBODY.name}",
    )
    allowed = cluster.kubectl("get", PLURAL, "-n", namespace, as_user=NOBODY, check=False)
    assert allowed.returncode == 0, allowed.stderr
    other = cluster.kubectl("get", "secrets", "-n", namespace, as_user=NOBODY, check=False)
    assert "Forbidden" in other.stderr
