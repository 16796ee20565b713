"""The client's ApiException, turned once into kube.errors' typed set where the call is made:
the status's class, its reason, the API server's field causes, and nothing of the response's
headers or body in its words."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client as sync_client
from kubernetes.aio import client

from gatehouse_operator.kube import errors, failure


def _refused(status: int, body: object = None) -> client.ApiException:
    error = client.ApiException(status=status, reason="Refused")
    error.body = json.dumps(body) if body is not None else None
    error.headers = {"Audit-Id": "abc", "Retry-After": "3"}
    return error


class _Handle:
    """An API group's handle as the client's are: async calls, and an attribute or two."""

    api_client = "the client"

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def read_namespaced_secret(self, name: str, namespace: str) -> str:
        raise self.error

    def list_sync(self) -> str:
        raise self.error


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, errors.Invalid),
        (401, errors.Unauthorized),
        (403, errors.Forbidden),
        (404, errors.NotFound),
        (409, errors.Conflict),
        (422, errors.Invalid),
        (429, errors.Unavailable),
        (503, errors.Unavailable),
        (418, errors.ApiError),
    ],
)
def test_a_call_through_a_translated_handle_raises_the_typed_error(
    status: int, kind: type[errors.ApiError]
) -> None:
    handle = errors.translate(_Handle(_refused(status)))
    with pytest.raises(kind) as caught:
        asyncio.run(handle.read_namespaced_secret("vendor", "shop"))
    assert type(caught.value) is kind
    assert (caught.value.status, caught.value.reason, caught.value.retry_after) == (
        status,
        "Refused",
        "3",
    )
    assert handle.api_client == "the client"  # what is not a call passes as it is


def test_the_sync_clients_error_is_turned_alike() -> None:
    refused = sync_client.ApiException(status=404, reason="Not Found")
    handle = errors.translate(_Handle(refused))
    with pytest.raises(errors.NotFound):
        handle.list_sync()


def test_an_invalid_write_keeps_the_api_servers_field_causes_and_says_only_its_status() -> None:
    body = {
        "kind": "Status",
        "message": 'ExternalConnection.gatehouse.dev "x" is invalid: spec.baseURL: Invalid value',
        "reason": "Invalid",
        "details": {
            "causes": [
                {"reason": "FieldValueInvalid", "message": "Invalid value", "field": "spec.baseURL"}
            ]
        },
        "code": 422,
    }
    error = errors.translated(_refused(422, body))
    assert isinstance(error, errors.Invalid)
    assert error.causes == [errors.Cause("spec.baseURL", "Invalid value", "FieldValueInvalid")]
    assert json.loads(error.body)["message"] == body["message"]
    # Its words for a log or a condition: the status alone, never the headers or the body.
    assert str(error) == failure(error) == "HTTP 422 Refused"
    assert errors.translated(_refused(500, ["not", "a", "Status"])).causes == []
