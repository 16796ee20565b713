"""The lenient read of stored resources: a connection the strict model refuses (the controller
marks it InvalidSpec) still reads, with the schema's defaults where a field is unset."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gatehouse_operator.api.conditions import ConditionType
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.stored import StoredApp, StoredConnection, StoredProjectConfig

INVALID = {
    "metadata": {"name": "crm", "resourceVersion": "4"},
    "spec": {
        "displayName": "CRM",
        "baseURL": "https://api.crm.example/v1",
        "auth": {"type": "bearer"},
        "allowedPaths": None,
        "somethingNewer": True,
    },
    "status": {
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "InvalidSpec", "message": "no"}
        ]
    },
}


def test_a_connection_the_strict_model_refuses_still_reads() -> None:
    with pytest.raises(ValidationError):
        ExternalConnectionSpec.model_validate(INVALID["spec"])

    connection = StoredConnection.of(INVALID)

    assert connection.name == "crm"
    assert connection.origin == "https://api.crm.example/v1"
    assert connection.spec.allowed_methods == ["GET"]
    assert connection.spec.allowed_paths == []
    assert connection.spec.link_policy == "AdminsOnly"
    assert connection.spec.auth_type == "bearer"
    assert connection.status.condition(ConditionType.READY).reason == "InvalidSpec"


def test_an_image_only_connection_keeps_its_empty_methods() -> None:
    body = {"metadata": {"name": "tiles"}, "spec": {"allowedMethods": []}}
    assert StoredConnection.of(body).spec.allowed_methods == []


def test_an_app_reads_its_links() -> None:
    app = StoredApp.of({"metadata": {"name": "board"}, "spec": {}})
    assert app.linked == set()
    linked = {"connections": [{"alias": "a", "connection": "crm"}]}
    assert StoredApp.of({"metadata": {"name": "sales"}, "spec": linked}).linked == {"crm"}


def test_the_secret_a_connection_names() -> None:
    ref = {"type": "bearer", "secretRef": {"name": "crm-token", "key": "token"}}
    named = {"metadata": {"name": "crm"}, "spec": {"auth": ref}}
    assert StoredConnection.of(named).spec.secret_ref_name == "crm-token"
    sealed = {"metadata": {"name": "crm"}, "spec": {"auth": {"sealedSecret": "x"}}}
    assert StoredConnection.of(sealed).spec.secret_ref_name == ""


def test_a_project_configs_defaults_as_given() -> None:
    given = {"defaults": {"flag": False, "timezone": "UTC"}, "other": 1}
    config = StoredProjectConfig.model_validate({"metadata": {"name": "p"}, "spec": given})
    assert config.spec.defaults == {"flag": False, "timezone": "UTC"}
    assert StoredProjectConfig.model_validate({"spec": {"defaults": None}}).spec.defaults == {}
    assert StoredProjectConfig.model_validate({}).spec.defaults == {}
