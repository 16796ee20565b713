"""An ExternalConnection spec as the page's wizard writes it, before the API server has judged it.

The wizard keeps what the visitor entered, wrong or not, to show it back, to build the strict
``ExternalConnectionSpec`` of it (whose refusals the page names under its fields' titles) and to
send it to the API server (a dry run, then the apply). So this is the spec's shape on the wire,
field names as Kubernetes spells them, keys in the order the YAML shows them, values as entered:
no defaults, no rules. tests/operator/test_one_declaration.py holds it to the strict model.
"""

from __future__ import annotations

from typing import NotRequired, Required, TypedDict

from pydantic import JsonValue, TypeAdapter


class HeaderDocument(TypedDict):
    name: str
    value: str


# "in" is a Python keyword: the functional form.
ApiKeyDocument = TypedDict("ApiKeyDocument", {"name": str, "in": str})


class GoogleServiceAccountDocument(TypedDict):
    scopes: list[str]


class OAuth2Options(TypedDict, total=False):
    scopes: list[str]
    clientAuthentication: str
    parameters: dict[str, str]


class OAuth2Document(OAuth2Options):
    tokenURL: str
    clientId: str


class OAuth2CodeOptions(TypedDict, total=False):
    scopes: list[str]
    authorizationParameters: dict[str, str]
    clientAuthentication: str
    revocationURL: str
    credentialScope: str


class OAuth2CodeDocument(OAuth2CodeOptions):
    authorizationURL: str
    tokenURL: str
    clientId: str


class AwsWebIdentityDocument(TypedDict):
    roleArn: str
    durationSeconds: NotRequired[int]


class AwsSigV4Document(TypedDict):
    region: str
    service: str
    payloadSigning: str
    webIdentity: NotRequired[AwsWebIdentityDocument]


class SecretRefDocument(TypedDict):
    name: str
    key: str


class AuthDocument(TypedDict, total=False):
    type: Required[str]
    apiKey: ApiKeyDocument
    googleServiceAccount: GoogleServiceAccountDocument
    oauth2ClientCredentials: OAuth2Document
    oauth2AuthorizationCode: OAuth2CodeDocument
    awsSigV4: AwsSigV4Document
    secretRef: SecretRefDocument
    sealedSecret: str


class ConnectionSpecOptions(TypedDict, total=False):
    """The fields a spec may leave out."""

    allowedPaths: list[str]
    headers: list[HeaderDocument]
    allowedContentTypes: list[str]
    allowPublicImages: bool
    forwardViewerIdentity: bool
    instructions: str
    # The ones the wizard shows as entered, the others as stored (an edit keeps them).
    limits: dict[str, JsonValue]
    # As stored: the wizard does not show it, and an edit keeps it.
    cache: dict[str, JsonValue]
    # The wizard's TLS section (client certificate Secret, CA bundle, system roots).
    tls: dict[str, JsonValue]


class ConnectionSpecDocument(ConnectionSpecOptions):
    displayName: str
    baseURL: str
    allowedMethods: list[str]
    auth: AuthDocument
    linkPolicy: str


_JSON_OBJECT: TypeAdapter[dict[str, JsonValue]] = TypeAdapter(dict[str, JsonValue])


def as_json(spec: ConnectionSpecDocument) -> dict[str, JsonValue]:
    """The spec as any JSON object, as the service API's draft test takes one."""
    return _JSON_OBJECT.validate_python(spec)
