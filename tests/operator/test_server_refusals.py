"""The API server's refusal of a change, as the page and the service API show it: each field
cause under the field it names (the page's title, or the API's path), a webhook's reason whole,
and nothing cut mid-word."""

from __future__ import annotations

import json
import re

from kubernetes.aio import client

from gatehouse_operator.access.as_user import MAX_REFUSAL_CHARS, refusal
from gatehouse_operator.kube.errors import ApiError, translated
from gatehouse_operator.web.connection_forms import server_refusal
from gatehouse_operator.web.wizard import step_of

NAME_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character"
)
CAUSES = [
    # In the API server's order, not the page's.
    {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "/v1/../a": allowedPaths entries must not contain . or .. '
        "segments",
        "field": "spec.allowedPaths[1]",
    },
    {
        "reason": "FieldValueInvalid",
        "message": f'Invalid value: "Pay API": {NAME_RULE}',
        "field": "metadata.name",
    },
    {
        "reason": "FieldValueInvalid",
        "message": "Invalid value: exactly one of auth.secretRef and auth.sealedSecret is required",
        "field": "spec.auth",
    },
    {
        "reason": "FieldValueInvalid",
        # An API server before 1.33 names the type where an object's value would be.
        "message": 'Invalid value: "object": headers[].name must not be Host',
        "field": "spec.headers[0]",
    },
    {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.limits.x"},
]


def answered(status: int, message: str, causes: list[dict[str, str]] | None = None) -> ApiError:
    error = client.ApiException(status=status, reason="Refused")
    body: dict[str, object] = {"kind": "Status", "message": message, "code": status}
    if causes is not None:
        body["details"] = {"causes": causes}
    error.body = json.dumps(body)
    return translated(error)


def test_the_page_names_each_cause_by_its_fields_title_in_the_pages_order() -> None:
    error = answered(422, 'ExternalConnection.gatehouse.dev "Pay API" is invalid: [...]', CAUSES)
    assert server_refusal(error.causes, refusal(error)).listed() == [
        f'Resource name: Invalid value: "Pay API": {NAME_RULE}',
        'Allowed paths: Invalid value: "/v1/../a": allowedPaths entries must not contain . or '
        ".. segments",
        "Headers: headers[].name must not be Host",
        "Authentication: exactly one of auth.secretRef and auth.sealedSecret is required",
        # A field the page does not show: the API's own path.
        "spec.limits.x: Required value",
    ]


def test_a_refusal_without_causes_is_shown_whole() -> None:
    said = (
        'admission webhook "secret-use.gatehouse.dev" denied the request: ana may not get '
        "Secret 'x-credential' in shop"
    )
    error = answered(403, said)
    assert refusal(error) == said
    assert server_refusal(error.causes, refusal(error)).listed() == [said]
    assert refusal(answered(500, "")) == ""
    unreadable = client.ApiException(status=502, reason="Bad Gateway")
    unreadable.body = "<html>"
    assert refusal(translated(unreadable)) == "the API server refused the request (502)"


def test_the_service_api_says_each_cause_by_the_apis_path() -> None:
    error = answered(422, "is invalid: [...]", CAUSES[:3])
    assert refusal(error) == (
        'spec.allowedPaths[1]: Invalid value: "/v1/../a": allowedPaths entries must not '
        "contain . or .. segments; "
        f'metadata.name: Invalid value: "Pay API": {NAME_RULE}; '
        "spec.auth: exactly one of auth.secretRef and auth.sealedSecret is required"
    )


def test_a_long_refusal_is_cut_at_a_word_and_says_so() -> None:
    words = " ".join(f"word{index}" for index in range(1000))
    shown = refusal(answered(403, f"denied the request: {words}"))
    assert len(shown) <= MAX_REFUSAL_CHARS
    kept, mark = shown.rsplit(" ", 2)[0], shown.rsplit(" ", 2)[1:]
    assert mark == ["…", "(shortened)"]
    assert f"denied the request: {words}".startswith(kept + " ")
    assert re.search(r"word\d+$", kept)
    # A cause's message is bounded alike, each under its title.
    long = [{**CAUSES[0], "message": f"Invalid value: {words}"}]
    error = answered(422, "is invalid", long)
    (line,) = server_refusal(error.causes, refusal(error)).listed()
    assert line.startswith("Allowed paths: word0 word1 ")
    assert line.endswith(" … (shortened)")
    assert len(line) <= len("Allowed paths: ") + MAX_REFUSAL_CHARS


def test_each_cause_is_the_problem_of_the_field_it_names_on_that_fields_step() -> None:
    """The page shows each of the API server's causes next to its field, on the step that
    shows it (issue 50 item 3); one on no field of the page is listed, on no step."""
    error = answered(422, 'ExternalConnection.gatehouse.dev "Pay API" is invalid: [...]', CAUSES)
    found = server_refusal(error.causes, refusal(error))
    assert {path: step_of(path) for path in found.found} == {
        "allowedPaths": "api",
        "metadata.name": "api",
        "auth": "auth",
        "headers": "api",
    }
    assert found.found["metadata.name"] == [f'Resource name: Invalid value: "Pay API": {NAME_RULE}']
    assert found.elsewhere == ["spec.limits.x: Required value"]
    # A step's own: the API step's causes only, in the page's order.
    assert found.only(lambda path: step_of(path) == "api").listed() == [
        f'Resource name: Invalid value: "Pay API": {NAME_RULE}',
        'Allowed paths: Invalid value: "/v1/../a": allowedPaths entries must not contain . or '
        ".. segments",
        "Headers: headers[].name must not be Host",
    ]
