"""ConnectionSample: a passing test's answer, redacted, kept for app builders and the app generator.

The operator writes one when a ConnectionTest asks for it (``spec.saveAsSample`` or the
save-as-sample annotation): named as the test, owned by the connection (deleted with it) and
labelled with the connection's name, so ``kubectl get connectionsamples -l
gatehouse.dev/connection=vendor`` lists one connection's samples. A sample is a record, written
once; deleting the resource deletes the sample.

Samples are resources of their own, not keys of a ConfigMap, so that the operator needs no rights
on ConfigMaps: RBAC cannot narrow a rule by label, and a ConfigMap rule would reach every
ConfigMap in the cluster, ``kube-system`` included.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gatehouse_operator.api.connection import HttpMethod
from gatehouse_operator.api.connection_test import SAMPLE_LABEL_CHARS
from gatehouse_operator.api.meta import DNS_SUBDOMAIN, Kind, Model, PrinterColumn
from gatehouse_operator.cel import cel, validations

CONNECTION_LABEL = "gatehouse.dev/connection"


class SampledRequest(Model):
    method: HttpMethod = Field(description="The HTTP method the test used.")
    path: str = Field(
        max_length=2048, description="The path and query the test asked for, redacted."
    )
    body: Any = Field(
        default=None,
        description="The JSON body the test sent, redacted and size-capped as the answer is, "
        "so the app generator sees an example request.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


class ConnectionSampleSpec(Model):
    """The answer as it was saved; a record, never changed."""

    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel("self == oldSelf", "a sample is a record: delete it and save another instead"),
        )
    }

    connection: str = Field(
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="The ExternalConnection that answered, in the same namespace.",
    )
    label: str = Field(
        default="",
        max_length=SAMPLE_LABEL_CHARS,
        description="The sample's name, shown to app builders and the app generator; optional.",
    )
    saved_at: str = Field(
        json_schema_extra={"format": "date-time"}, description="When the operator saved it."
    )
    request: SampledRequest = Field(description="What the test asked, redacted as the answer is.")
    status_code: int = Field(ge=100, le=599, description="The upstream's HTTP status.")
    content_type: str = Field(
        default="", max_length=256, description="The answer's Content-Type header."
    )
    body: Any = Field(
        default=None,
        description="The answer's body, redacted, arrays cut and size-capped.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


CONNECTION_SAMPLE = Kind(
    kind="ConnectionSample",
    plural="connectionsamples",
    description="A passing ConnectionTest's answer, redacted, kept for app builders and the app "
    "generator.",
    spec=ConnectionSampleSpec,
    status=None,
    short_names=("xsample",),
    columns=[
        PrinterColumn("Connection", ".spec.connection"),
        PrinterColumn("Label", ".spec.label"),
        PrinterColumn("HTTP", ".spec.statusCode", type="integer"),
        PrinterColumn("Request", ".spec.request.path", priority=1),
    ],
)
