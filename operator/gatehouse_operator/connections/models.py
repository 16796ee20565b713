"""What the connection use cases take and answer; the service API serves them as they are (its
OpenAPI document is generated from them), and the page renders them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired

from pydantic import ConfigDict, Field, JsonValue, TypeAdapter, ValidationInfo, field_validator

# Pydantic reads typing.TypedDict only from Python 3.12.
from typing_extensions import TypedDict

from gatehouse_operator.api.auth_kinds import described_sections, secrets_described
from gatehouse_operator.api.connection import HttpMethod, LinkPolicy
from gatehouse_operator.api.connection_test import (
    DEFAULT_TEST_METHOD,
    DEFAULT_TEST_PATH,
    MAX_TEST_PATH_CHARS,
    TEST_PATH_PATTERN,
    SampleRequest,
    body_problem,
)
from gatehouse_operator.api.meta import DNS_LABEL, Model


class LinkableConnection(Model):
    name: str
    display_name: str
    origin: str = Field(description="The origin every request is pinned to.")
    allowed_methods: list[HttpMethod]
    allowed_paths: list[str]
    auth_type: str
    has_secret: bool = Field(description="Whether a credential is set; never the credential.")
    link_policy: LinkPolicy
    allow_public_images: bool
    forward_viewer_identity: bool = Field(
        default=False,
        description="Whether the API is told who asks (X-Gatehouse-* headers); each request "
        "then needs the viewer's assertion.",
    )
    instructions: str
    ready: bool = Field(description="Whether the proxy routes the connection now.")
    ready_reason: str = Field(default="", description="The Ready condition's reason.")
    ready_message: str = Field(default="", description="The Ready condition's message.")
    settled: bool = Field(
        default=True,
        description="Whether ready and hasSecret are the operator's word on the spec as it is "
        "now; false for a moment after a change, until the operator has seen it.",
    )
    linked_by: list[str] = Field(
        default_factory=list, description="The apps linking it, as Kind/name, sorted."
    )
    link_warning: str = Field(
        default="",
        description="What linking it lets apps do, to show whoever links it: send any data "
        "they can query to the origin, and with write methods allowed, change data there.",
    )


class ConnectionList(Model):
    items: list[LinkableConnection]
    all_visible: bool = Field(
        description="True for admins; otherwise only connections with linkPolicy Builders."
    )


class SampledRequestShown(TypedDict):
    """A sample's request as its ConnectionSample keeps it (api.connection_sample.SampledRequest);
    one saved before requests kept a body has none. Read leniently, as api.stored reads."""

    __pydantic_config__ = ConfigDict(extra="ignore")  # type: ignore[misc]

    method: str
    path: str
    body: NotRequired[JsonValue]


class Sample(Model):
    id: str
    label: str
    saved_at: str
    request: SampledRequestShown = Field(
        description="What the test sent: method, path and query, and its JSON body, redacted."
    )
    status_code: int
    content_type: str
    body: Any = Field(default=None, description="The redacted, size-capped response body.")


class ConnectionHeader(Model):
    """A header the connection sends on every request: not a secret."""

    name: str
    value: str


class Paused(Model):
    """A pause the API asked for (its 429 or 503 with Retry-After) that the proxies keep now."""

    scope: Literal["credential", "endpoint"] = Field(
        description="credential: the whole connection is paused (the credential's limit, as "
        "limits.credentialLimit says); endpoint: only the endpoint the answer came on."
    )
    endpoint: str = Field(
        description="The endpoint the answer came on (the path cut to its allowedPaths entry, "
        "at least two segments); empty when a proxy of an earlier release told it."
    )
    status: int = Field(description="What the API answered: 429 or 503.")
    retry_after_seconds: float = Field(description="How long it asked to wait, in seconds.")
    until: float = Field(description="When the pause ends, in seconds since the epoch.")


class ConnectionDetail(Model):
    connection: LinkableConnection
    # Echoed as stored, for the page to show (and the service API to answer) as the spec has it.
    auth: dict[str, JsonValue] = Field(
        description=f"The auth settings as in the spec: type, {described_sections()}, and the "
        "secretRef's name and key or the sealed value (never the secret)."
    )
    headers: list[ConnectionHeader] = Field(
        default_factory=list, description="The headers sent on every request (spec.headers)."
    )
    allowed_content_types: list[str] = Field(
        default_factory=list,
        description="The media types an answer may have (spec.allowedContentTypes); empty: any.",
    )
    limits: dict[str, JsonValue] = Field(description="The spec's limits, as given.")
    paused: list[Paused] = Field(
        default_factory=list,
        description="What the API paused now, as the proxies told the operator: the whole "
        "connection first, then each endpoint, by when it ends.",
    )
    samples: list[Sample]
    can_manage: bool = Field(description="Whether the caller may edit and delete it.")
    cache: dict[str, JsonValue] | None = Field(
        default=None, description="The spec's response cache, as given; null: nothing is cached."
    )
    cache_purged_at: str = Field(
        default="",
        description="When its cached answers were last purged (the annotation "
        "gatehouse.dev/cache-purged-at, RFC 3339); empty: never.",
    )
    tls: dict[str, JsonValue] | None = Field(
        default=None,
        description="The spec's TLS to the API (spec.tls), as given: the client certificate's "
        "Secret name or sealed value, the CA bundle; null: the defaults.",
    )
    client_certificate: dict[str, JsonValue] | None = Field(
        default=None,
        description="The client certificate the proxies present, as the operator read it "
        "(status.clientCertificate: subject, issuer, notAfter); never its key.",
    )


class CachePurged(Model):
    purged_at: str = Field(
        description="The purge's time (RFC 3339), now the cache's epoch: the answers cached "
        "before it are never served again, in every proxy replica once it holds the new route."
    )


class SampleSaveOutcome(Model):
    saved: bool
    sample: str = Field(default="", description="The sample's id, when saved.")
    reason: str
    message: str


class LinkedConnectionSpec(Model):
    """A linked connection the caller may see: what the app generator needs to call it."""

    alias: str
    connection: str
    display_name: str
    origin: str
    allowed_methods: list[HttpMethod]
    allowed_paths: list[str]
    instructions: str
    samples: list[Sample]
    headers: list[ConnectionHeader] = Field(
        default_factory=list,
        description="Headers the proxy sends on every request, in place of the app's of the "
        "same name (versions vendors require): the app need not send them.",
    )
    allowed_content_types: list[str] = Field(
        default_factory=list,
        description="The media types an answer may have; another is refused (502 "
        "content_type_not_allowed). Empty: any.",
    )
    fetch_path: str = Field(description="Where app code sends its requests through the proxy.")
    details_hidden: Literal[False] = Field(
        default=False, description="False: the connection's details are all here."
    )


class HiddenLink(Model):
    """A link to a connection the caller may not see (or that does not exist: the two read
    alike): only what the app itself says, its alias and the connection's name, and its fetch
    path."""

    alias: str
    connection: str
    fetch_path: str = Field(description="Where app code sends its requests through the proxy.")
    details_hidden: Literal[True] = Field(
        default=True,
        description="True: the caller may not see this connection, so its origin, methods, "
        "paths, headers, content types, instructions and samples are left out.",
    )
    reason: str = Field(description="Why the details are left out, and who may see them.")


class ImagePolicy(Model):
    origins: list[str] = Field(
        description="Origins of linked connections with public images (of those the caller may "
        "see)."
    )
    img_src: str = Field(description="A ready Content-Security-Policy img-src value.")


class BuildSpec(Model):
    kind: Literal["DataApp", "ChartType"]
    name: str
    connections: list[LinkedConnectionSpec | HiddenLink]
    image_policy: ImagePolicy


class TrialRequest(Model):
    method: HttpMethod = DEFAULT_TEST_METHOD
    path: str = Field(
        default=DEFAULT_TEST_PATH,
        pattern=TEST_PATH_PATTERN,
        max_length=MAX_TEST_PATH_CHARS,
        description="Path and optional query, relative to the base URL.",
    )
    body: Any = Field(default=None, description="A JSON body, sent with methods other than GET.")

    @field_validator("body")
    @classmethod
    def _no_body_with_get(cls, body: Any, info: ValidationInfo) -> Any:
        # As ConnectionTest admission refuses it: a draft's test must not pass what a saved
        # connection's test would not.
        if problem := body_problem(info.data.get("method", DEFAULT_TEST_METHOD), body):
            raise ValueError(problem)
        return body


class ConnectionTestRequest(TrialRequest):
    save_as_sample: SampleRequest | None = None


class DraftTestRequest(Model):
    """A connection that is not saved, and one request to try it with."""

    name: str = Field(
        max_length=253,
        pattern=DNS_LABEL,
        description="The connection's name, as it would be created (or as it is, to edit it).",
    )
    # Judged by the API server as the caller (its schema's rules, the admission webhook), as an
    # apply of it would be: what it answers is what the caller is told.
    spec: dict[str, JsonValue] = Field(
        description="The ExternalConnection spec as it would be applied."
    )
    secret: str | None = Field(
        default=None,
        max_length=65_536,
        description=f"The credential, written only: {secrets_described()}. Without it the "
        "Secret that spec.auth.secretRef names is used, or the sealed value.",
    )
    replaces: bool = Field(
        default=False, description="True to try an edit of the existing connection of this name."
    )
    request: TrialRequest = Field(default_factory=TrialRequest)


class AnswerShown(TypedDict, total=False):
    """What the connection answered, as a ConnectionTest's status.response holds it
    (api.connection_test.UpstreamAnswer), read leniently as api.stored reads: the fields it
    has, as they are (location only for a redirect)."""

    __pydantic_config__ = ConfigDict(extra="ignore")  # type: ignore[misc]

    statusCode: int
    contentType: str
    body: str
    truncated: bool
    sizeBytes: int
    location: str


_ANSWER_SHOWN: TypeAdapter[AnswerShown] = TypeAdapter(AnswerShown)


def answer_shown(response: Mapping[str, object]) -> AnswerShown:
    """A test's answer, as a test's result or a stored status.response has it, read as shown."""
    return _ANSWER_SHOWN.validate_python(response)


class DraftTestOutcome(Model):
    passed: bool
    reason: str
    message: str
    response: AnswerShown | None = Field(
        default=None,
        description="statusCode, contentType, body (redacted, truncated), truncated, sizeBytes.",
    )


class ConnectionTestOutcome(Model):
    name: str = Field(description="The ConnectionTest resource that ran the test.")
    passed: bool
    reason: str
    message: str
    response: AnswerShown | None = None
    sample: str = ""


class RecentRequestView(Model):
    """One fetch an app made through the proxy, as the replica that served it recorded it:
    never a header value, a body or a query value."""

    time: float = Field(description="When its answer ended, in seconds since the epoch.")
    app: str = Field(description="The app, as Kind/name.")
    connection: str = Field(description="The connection's name; empty when the alias named none.")
    method: str
    path: str = Field(description="The path under the connection, query values replaced by *.")
    status: int
    code: str = Field(description="ok, or the proxy's error code.")
    duration_ms: float
    request_bytes: int
    response_bytes: int
    replica: str = Field(description="The proxy replica that served it.")
    trace_id: str = Field(description="The W3C trace id the app sent, or one the proxy made.")
    viewer: str = Field(
        default="",
        description="The verified viewer the app asked for (the assertion's sub), on a "
        "connection that needs one; empty otherwise, or when the installation keeps none "
        "(viewers.recordViewerIds).",
    )
    cache: str = Field(
        default="",
        description="What the connection's cache did: hit or collapsed (answered from the "
        "cache, the vendor not called), revalidated (the vendor confirmed a stale answer), stale "
        "(a stale answer stood in for a failed call), miss (the vendor called), bypass (not the "
        "cache's); empty when the connection has no cache.",
    )
    details_hidden: Literal[False] = Field(
        default=False, description="False: the caller may see the connection, so all is here."
    )


class HiddenRequestView(Model):
    """One fetch through a connection the caller may not see (or that is gone: the two read
    alike), shown as build-spec shows a link to it: when, which app, the connection's name (the
    app's own link says it) and how the app was answered; never what it asked of the connection
    (method, path, query names) nor how much came back."""

    time: float = Field(description="When its answer ended, in seconds since the epoch.")
    app: str = Field(description="The app, as Kind/name.")
    connection: str = Field(description="The connection's name.")
    status: int
    code: str = Field(description="ok, or the proxy's error code.")
    replica: str = Field(description="The proxy replica that served it.")
    trace_id: str = Field(description="The W3C trace id the app sent, or one the proxy made.")
    details_hidden: Literal[True] = Field(
        default=True,
        description="True: the caller may not see this connection, so the method, path, "
        "duration and sizes are left out.",
    )


class RecentRequests(Model):
    items: list[RecentRequestView | HiddenRequestView] = Field(
        description="Newest first: at most limit of them, or, asked after a cursor, every "
        "replica's next ones (at most limit of each)."
    )
    replicas_asked: int
    replicas_answered: int = Field(
        description="Fewer than asked: a replica did not answer within 2 s, so some may be missing."
    )
    hidden_reason: str = Field(
        default="",
        description="Why some items have detailsHidden: true, and who may see them whole; "
        "empty when none has.",
    )
    cursor: str = Field(
        default="",
        description="Where these leave a follower: send it back as after= for the requests "
        "that end next, none given twice or left out.",
    )
    lost: int = Field(
        default=0,
        description="Requests that ended after the cursor sent but that the replicas no "
        "longer held (each keeps its last 200 per connection and per app): never shown.",
    )


class UsagePoint(Model):
    start: float = Field(description="The minute's or hour's start, in seconds since the epoch.")
    requests: int
    errors: int
    p95_ms: float | None = Field(
        description="The 95th percentile's latency bin bound (None: no requests)."
    )
    cached: int = Field(
        default=0,
        exclude_if=lambda value: not value,
        description="Of the requests, those answered from the connection's cache (a hit, or an "
        "identical request's answer waited for): calls saved, the vendor not called. Left out "
        "when 0 (a connection without a cache).",
    )


class AppUsage(Model):
    app: str = Field(description="The app, as Kind/name.")
    points: list[UsagePoint] = Field(description="Oldest first, ending now.")


class ConnectionUsage(Model):
    window: Literal["hour", "day"]
    apps: list[AppUsage]
