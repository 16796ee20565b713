"""What a change made as the user reads back: typed where it is read, and whole."""

from __future__ import annotations

from gatehouse_operator.access.as_user import UserObject

STORED = {
    "apiVersion": "gatehouse.dev/v1alpha1",
    "kind": "DataApp",
    "metadata": {
        "name": "board",
        "namespace": "shop",
        "uid": "6f1c",
        "resourceVersion": "42",
        "labels": {"team": "finance"},
        "finalizers": ["example.test/keep"],
    },
    "spec": {"displayName": "Board", "connections": [{"alias": "api", "connection": "vendor"}]},
    "status": {"links": []},
}


def test_a_replace_sends_back_every_field_that_was_read() -> None:
    # The page links a connection by replacing the app it read: a field the model does not name
    # (labels, finalizers, the status) must not be lost on the way.
    found = UserObject.model_validate(STORED)
    assert (found.metadata.name, found.metadata.uid, found.metadata.resource_version) == (
        "board",
        "6f1c",
        "42",
    )
    assert found.manifest() == STORED
    relinked = found.model_copy(update={"spec": {**found.spec, "connections": []}})
    assert relinked.manifest() == {**STORED, "spec": {"displayName": "Board", "connections": []}}
