"""Storage for the dev node, as a cluster gives a chart storage: a default StorageClass and
volumes to bind its claims to.

The chart's bundled store keeps its append-only file on a PersistentVolumeClaim
(``store.persistence``, on as the chart ships), so a node with no storage could not install it.
The least that serves, with no provisioner to run: a default StorageClass of type
``kubernetes.io/no-provisioner`` and ``local`` volumes made ahead, each a folder of the node's own
(``local`` rather than ``hostPath``: the kubelet gives a local volume to the Pod's ``fsGroup``, so
the store, non-root, writes to it). Nothing deletes a volume whose claim is gone (``helm
uninstall`` deletes the chart's claim): it is ``Released`` and never offered again, as a
``Retain`` class does, and the next claim takes a fresh, empty one; there are enough for every
install of a node's life in the tests, and ``make cluster-down`` deletes their folders.
"""

from __future__ import annotations

from typing import Any

import yaml

from gatehouse_dev.node import layout
from gatehouse_dev.node.layout import NodeFiles

STORAGE_CLASS = "node-local"
# The node tests install the bundled store three times (the chart, the umbrella chart, the fault
# suite); the rest are for installs of one's own on `make cluster-up`.
VOLUMES = 8
# A claim binds to a volume at least its size; a local folder is bounded by the disk alone.
CAPACITY = "10Gi"


def _volume(files: NodeFiles, index: int) -> dict[str, Any]:
    folder = files.volumes / f"volume-{index}"
    folder.mkdir(parents=True, exist_ok=True)
    on_the_node = {"key": "kubernetes.io/hostname", "operator": "In", "values": [layout.NODE_NAME]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"node-local-{index}"},
        "spec": {
            "capacity": {"storage": CAPACITY},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": STORAGE_CLASS,
            "local": {"path": str(folder)},
            "nodeAffinity": {
                "required": {"nodeSelectorTerms": [{"matchExpressions": [on_the_node]}]}
            },
        },
    }


def manifests(files: NodeFiles) -> str:
    """The StorageClass and the volumes, their folders made."""
    default = {"storageclass.kubernetes.io/is-default-class": "true"}
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS, "annotations": default},
        "provisioner": "kubernetes.io/no-provisioner",
        "reclaimPolicy": "Retain",
        # Bound when the Pod is scheduled, as local volumes must be (the scheduler sees the node).
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    documents = [storage_class, *(_volume(files, index) for index in range(VOLUMES))]
    return yaml.safe_dump_all(documents)
