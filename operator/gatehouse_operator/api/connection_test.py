"""ConnectionTest: one request to a connection, run through the proxy, with its result in status.

A test is a resource, as a certificate request is in cert-manager: create it, read the outcome
from its status, and let the operator delete it some time after it finished. A passing test can
be kept as a redacted sample for the app generator: asked for in the spec before it runs, or
after its result was seen, with the annotation ``gatehouse.dev/save-as-sample: <label>``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gatehouse_contract.connection_tests import MAX_LOCATION_CHARS
from gatehouse_operator.api.connection import HttpMethod
from gatehouse_operator.api.meta import DNS_SUBDOMAIN, Kind, Model, PrinterColumn, Status
from gatehouse_operator.cel import cel, validations

# The test result keeps the first characters of the body (the reference UI shows as many).
RESULT_BODY_CHARS = 4_000
DEFAULT_TTL_SECONDS = 3_600
SAVE_AS_SAMPLE_ANNOTATION = "gatehouse.dev/save-as-sample"
SAMPLE_LABEL_CHARS = 200
# What a test asks when its spec names no method or path (the schema's defaults).
DEFAULT_TEST_METHOD: HttpMethod = "GET"
DEFAULT_TEST_PATH = "/"
# A test's path: relative to the base URL, with an optional query; no fragment.
TEST_PATH_PATTERN = r"^/[^\s#]*$"
MAX_TEST_PATH_CHARS = 2048


def body_problem(method: str, body: object) -> str:
    """A test's rule its schema does not state: a GET sends no body ("" when it holds)."""
    return "a GET test cannot have a body" if method == "GET" and body is not None else ""


class SampleRequest(Model):
    label: str = Field(
        default="",
        max_length=SAMPLE_LABEL_CHARS,
        description="A name for the sample, shown to app builders and the app generator; "
        "optional, as in the reference.",
    )


class ConnectionTestSpec(Model):
    """One request to send through the proxy, as an app's fetch would be; immutable."""

    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel(
                "self == oldSelf",
                "a ConnectionTest is immutable: create a new one to test again",
            ),
        )
    }

    connection: str = Field(
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="The ExternalConnection to test, in the same namespace.",
    )
    method: HttpMethod = Field(
        default=DEFAULT_TEST_METHOD, description="Must be one of the connection's allowedMethods."
    )
    path: str = Field(
        default=DEFAULT_TEST_PATH,
        max_length=MAX_TEST_PATH_CHARS,
        pattern=TEST_PATH_PATTERN,
        description="Path (and optional query) relative to the connection's base URL.",
    )
    body: Any = Field(
        default=None,
        description="A JSON request body, for methods other than GET (checked at admission: "
        "CEL cannot see untyped fields).",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    save_as_sample: SampleRequest | None = Field(
        default=None,
        description="Keep the response as a redacted sample if the test passes (2xx).",
    )
    ttl_seconds_after_finished: int = Field(
        default=DEFAULT_TTL_SECONDS,
        ge=0,
        le=604_800,
        description="How long a finished test is kept before the operator deletes it.",
    )


class UpstreamAnswer(Model):
    status_code: int = Field(default=0, ge=0, le=999, description="The upstream HTTP status.")
    content_type: str = Field(
        default="", max_length=256, description="The answer's Content-Type header."
    )
    body: str = Field(
        default="",
        max_length=RESULT_BODY_CHARS,
        description=f"The first {RESULT_BODY_CHARS} characters of the body, redacted.",
    )
    truncated: bool = Field(default=False, description="Whether the body was cut.")
    size_bytes: int = Field(default=0, ge=0, description="The full body's size.")
    location: str = Field(
        default="",
        max_length=MAX_LOCATION_CHARS,
        description="A redirect's Location, redacted: shown, never followed.",
    )


class ConnectionTestStatus(Status):
    """The test's result: Passed, the answer (redacted) and, when asked for, the sample."""

    response: UpstreamAnswer | None = Field(
        default=None, description="What the connection answered, when it answered."
    )
    error: str = Field(
        default="",
        max_length=1024,
        description="Why no answer came back (refused by the proxy's rules, timeout, ...).",
    )
    duration_ms: int = Field(
        default=0, ge=0, description="How long the test took, waiting for a proxy included."
    )
    finished_at: str = Field(
        default="",
        json_schema_extra={"format": "date-time"},
        description="When the test finished; it is deleted ttlSecondsAfterFinished later.",
    )
    sample: str = Field(default="", max_length=253, description="The saved sample's id.")
    sample_body: Any = Field(
        default=None,
        description="For a passing test: the body as a sample keeps it (redacted, arrays cut, "
        "size-capped), so the test can be saved as a sample after its result was seen.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


CONNECTION_TEST = Kind(
    kind="ConnectionTest",
    plural="connectiontests",
    description="One request to an ExternalConnection through the Gatehouse proxy, with the "
    "answer recorded in status.",
    spec=ConnectionTestSpec,
    status=ConnectionTestStatus,
    short_names=("xtest",),
    columns=[
        PrinterColumn("Connection", ".spec.connection"),
        PrinterColumn("Method", ".spec.method"),
        PrinterColumn("Path", ".spec.path"),
        PrinterColumn("HTTP", ".status.response.statusCode", type="integer"),
        PrinterColumn(
            "Passed",
            '.status.conditions[?(@.type=="Passed")].status',
            description="Whether the connection answered with a 2xx status.",
        ),
        PrinterColumn("Reason", '.status.conditions[?(@.type=="Passed")].reason'),
        PrinterColumn("Message", '.status.conditions[?(@.type=="Passed")].message', priority=1),
    ],
)
