"""The wizard's switch for the viewer's identity: off unless ticked, into the spec as
``forwardViewerIdentity``, and kept on an edit."""

from __future__ import annotations

from typing import Any

from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.stored import StoredConnection
from gatehouse_operator.web.wizard import WizardForm
from tests.operator.test_wizard import BASE, posted


def test_the_switch_goes_into_the_spec_only_when_ticked() -> None:
    off = posted({**BASE, "auth_type": "none"}).spec()
    assert "forwardViewerIdentity" not in off
    on = posted({**BASE, "auth_type": "none", "forward_viewer_identity": "on"}).spec()
    assert on["forwardViewerIdentity"] is True
    assert ExternalConnectionSpec.model_validate(on).forward_viewer_identity


def test_an_edit_shows_the_switch_as_stored() -> None:
    body: dict[str, Any] = {
        "metadata": {"name": "crm", "resourceVersion": "7"},
        "spec": {
            "displayName": "CRM",
            "baseURL": "https://api.example.com",
            "auth": {"type": "none"},
            "linkPolicy": "AdminsOnly",
            "forwardViewerIdentity": True,
        },
    }
    form = WizardForm.of(StoredConnection.of(body), "7")
    assert form.forward_viewer_identity
    assert form.spec()["forwardViewerIdentity"] is True
