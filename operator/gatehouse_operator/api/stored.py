"""Resources as the API server stores them, read leniently: what the use cases show of a
connection or an app, parsed once where the stored object enters.

The strict models (``ExternalConnectionSpec``, ``LinkedAppSpec``) refuse what the schema lets
through but the operator does not accept; the controller marks such a resource InvalidSpec
(its Ready condition's reason), and it must still be listed, shown and linked-to as stored, so
the rest of the operator can see that reason. These models take any stored object: unknown
fields are ignored, a missing or null field takes the schema's default (from
``api.connection``), and the values are the stored ones, unchecked beyond their JSON type.
tests/operator/test_one_declaration.py holds each shape here to its strict model: the same
fields, aliases and defaults.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator
from pydantic.alias_generators import to_camel

from gatehouse_operator.api.cache_purge import CACHE_PURGED_AT
from gatehouse_operator.api.conditions import ConditionType
from gatehouse_operator.api.connection import (
    DEFAULT_AUTH_TYPE,
    DEFAULT_CLIENT_AUTHENTICATION,
    DEFAULT_CREDENTIAL_SCOPE,
    DEFAULT_LINK_POLICY,
    DEFAULT_METHODS,
    DEFAULT_PAYLOAD_SIGNING,
    DEFAULT_ROLE_SECONDS,
    FIRST_KEY_PLACEMENT,
)
from gatehouse_operator.api.connection_document import SecretRefDocument
from gatehouse_operator.api.connection_test import DEFAULT_TTL_SECONDS


class Stored(BaseModel):
    """camelCase on the wire as the strict models; unknown fields ignored, null as unset."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )

    @model_validator(mode="before")
    @classmethod
    def _null_as_unset(cls, data: object) -> object:
        if isinstance(data, Mapping):
            return {key: value for key, value in data.items() if value is not None}
        return data


def as_mapping(value: object) -> Mapping[str, object]:
    """A level of an object as sent or stored, read as a mapping only if it is one (empty
    otherwise), for the models or the rules to judge what it holds."""
    return value if isinstance(value, Mapping) else {}


def _metadata(body: Mapping[str, object]) -> Mapping[str, object]:
    """An object's metadata (a name missing is the model's validation error)."""
    return as_mapping(body.get("metadata"))


def _default_methods() -> list[str]:
    return list(DEFAULT_METHODS)


class StoredHeader(Stored):
    name: str
    value: str


class StoredCondition(Stored):
    type: str = ""
    status: str = "Unknown"
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    # The generation of the spec the condition is about (0: not said).
    observed_generation: int = 0


class StoredConnectionSpec(Stored):
    display_name: str = ""
    base_url: str = Field(default="", alias="baseURL")
    # Unset: the default; an empty list stays empty (an image-only connection allows none).
    allowed_methods: list[str] = Field(default_factory=_default_methods)
    allowed_paths: list[str] = Field(default_factory=list)
    auth: dict[str, JsonValue] = Field(default_factory=dict)
    link_policy: str = DEFAULT_LINK_POLICY
    allow_public_images: bool = False
    forward_viewer_identity: bool = False
    instructions: str = ""
    headers: list[StoredHeader] = Field(default_factory=list)
    allowed_content_types: list[str] = Field(default_factory=list)
    limits: dict[str, JsonValue] = Field(default_factory=dict)
    cache: dict[str, JsonValue] | None = None
    tls: dict[str, JsonValue] | None = None

    @property
    def auth_type(self) -> str:
        return str(self.auth.get("type", DEFAULT_AUTH_TYPE))

    @property
    def secret_ref_name(self) -> str:
        """The Secret auth.secretRef names; "" when there is none."""
        ref = self.auth.get("secretRef")
        return str(ref.get("name") or "") if isinstance(ref, dict) else ""


class StoredStatus(Stored):
    conditions: list[StoredCondition] = Field(default_factory=list)

    def condition(self, kind: ConditionType) -> StoredCondition:
        """The condition of type ``kind``, or an empty one (status Unknown)."""
        return next((c for c in self.conditions if c.type == kind), StoredCondition())


class StoredConnectionStatus(StoredStatus):
    origin: str = ""
    has_secret: bool = False
    client_certificate: dict[str, JsonValue] | None = None


class StoredConnection(Stored):
    """An ExternalConnection as stored, valid or not."""

    name: str
    # metadata.generation: the spec's, which a status write leaves as it is.
    generation: int = 0
    spec: StoredConnectionSpec = Field(default_factory=StoredConnectionSpec)
    status: StoredConnectionStatus = Field(default_factory=StoredConnectionStatus)
    # The annotation gatehouse.dev/cache-purged-at (api.cache_purge), as set; "" when unset.
    cache_purged_at: str = ""

    @classmethod
    def of(cls, body: Mapping[str, object]) -> StoredConnection:
        """From the object the Kubernetes client returned."""
        metadata = _metadata(body)
        purged_at = as_mapping(metadata.get("annotations")).get(CACHE_PURGED_AT)
        return cls.model_validate(
            {
                **body,
                "name": metadata.get("name"),
                "generation": metadata.get("generation"),
                "cache_purged_at": purged_at if isinstance(purged_at, str) else "",
            }
        )

    @property
    def settled(self) -> bool:
        """Whether the status is the operator's word on the spec as it is now: its Ready
        condition is of this generation (until then it is of the spec before, or none yet)."""
        ready = self.status.condition(ConditionType.READY)
        return ready.observed_generation == self.generation and ready.status != "Unknown"

    @property
    def origin(self) -> str:
        """The origin as the operator pinned it, the baseURL until it has."""
        return self.status.origin or self.spec.base_url


# A stored connection's auth settings, read leniently as the rest: what the wizard starts an
# edit from, and compares an edit with to decide whether the stored secret is kept. Each part
# missing reads as empty, with the schema's defaults.


class StoredApiKey(Stored):
    name: str = ""
    in_: str = Field(default=FIRST_KEY_PLACEMENT, alias="in")


class StoredGoogleServiceAccount(Stored):
    scopes: list[str] = Field(default_factory=list)


class StoredOAuth2(Stored):
    token_url: str = Field(default="", alias="tokenURL")
    client_id: str = ""
    scopes: list[str] = Field(default_factory=list)
    client_authentication: str = DEFAULT_CLIENT_AUTHENTICATION
    parameters: dict[str, str] = Field(default_factory=dict)


class StoredOAuth2Code(Stored):
    authorization_url: str = Field(default="", alias="authorizationURL")
    token_url: str = Field(default="", alias="tokenURL")
    client_id: str = ""
    scopes: list[str] = Field(default_factory=list)
    authorization_parameters: dict[str, str] = Field(default_factory=dict)
    client_authentication: str = DEFAULT_CLIENT_AUTHENTICATION
    revocation_url: str = Field(default="", alias="revocationURL")
    credential_scope: str = DEFAULT_CREDENTIAL_SCOPE


class StoredAwsWebIdentity(Stored):
    role_arn: str = ""
    duration_seconds: int = DEFAULT_ROLE_SECONDS


class StoredAwsSigV4(Stored):
    region: str = ""
    service: str = ""
    payload_signing: str = DEFAULT_PAYLOAD_SIGNING
    # None: stored keys (the secret); a role's keys by web identity otherwise.
    web_identity: StoredAwsWebIdentity | None = None


class StoredSecretRef(Stored):
    name: str = ""
    key: str = ""

    def document(self) -> SecretRefDocument:
        return {"name": self.name, "key": self.key}


class StoredAuth(Stored):
    type: str = DEFAULT_AUTH_TYPE
    api_key: StoredApiKey = Field(default_factory=StoredApiKey)
    google_service_account: StoredGoogleServiceAccount = Field(
        default_factory=StoredGoogleServiceAccount
    )
    oauth2_client_credentials: StoredOAuth2 = Field(default_factory=StoredOAuth2)
    oauth2_authorization_code: StoredOAuth2Code = Field(default_factory=StoredOAuth2Code)
    aws_sig_v4: StoredAwsSigV4 = Field(default_factory=StoredAwsSigV4)
    secret_ref: StoredSecretRef | None = None
    sealed_secret: str = ""

    @classmethod
    def of(cls, spec: StoredConnectionSpec) -> StoredAuth:
        return cls.model_validate(spec.auth)


class StoredConnectionTestSpec(Stored):
    connection: str = ""
    ttl_seconds_after_finished: int = DEFAULT_TTL_SECONDS


class StoredConnectionTestStatus(StoredStatus):
    finished_at: str = ""
    response: dict[str, JsonValue] | None = None
    sample: str = ""
    # None when the test kept no sample body (or finished before tests kept one).
    sample_body: JsonValue = None


class StoredConnectionTest(Stored):
    """A ConnectionTest as stored: what is read of one without running it (which takes the
    strict ConnectionTestSpec)."""

    name: str
    annotations: dict[str, str] = Field(default_factory=dict)
    spec: StoredConnectionTestSpec = Field(default_factory=StoredConnectionTestSpec)
    status: StoredConnectionTestStatus = Field(default_factory=StoredConnectionTestStatus)

    @classmethod
    def of(cls, body: Mapping[str, object]) -> StoredConnectionTest:
        """From the object the Kubernetes client returned."""
        meta = _metadata(body)
        annotations = meta.get("annotations") or {}
        return cls.model_validate({**body, "name": meta.get("name"), "annotations": annotations})


class StoredProjectConfigSpec(Stored):
    defaults: dict[str, JsonValue] = Field(default_factory=dict)


class StoredProjectConfig(Stored):
    """A ProjectConfig as stored: its defaults as given (the service API answers with them)."""

    spec: StoredProjectConfigSpec = Field(default_factory=StoredProjectConfigSpec)


class StoredLink(Stored):
    alias: str
    connection: str


class StoredAppSpec(Stored):
    connections: list[StoredLink] = Field(default_factory=list)


class StoredApp(Stored):
    """A DataApp or ChartType as stored: its name and links."""

    name: str
    spec: StoredAppSpec = Field(default_factory=StoredAppSpec)

    @classmethod
    def of(cls, body: Mapping[str, object]) -> StoredApp:
        """From the object the Kubernetes client returned."""
        return cls.model_validate({**body, "name": _metadata(body).get("name")})

    @property
    def linked(self) -> set[str]:
        """The connections the app links."""
        return {link.connection for link in self.spec.connections}
