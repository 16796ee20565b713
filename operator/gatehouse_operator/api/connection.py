"""ExternalConnection: one third-party HTTP API a project may call through the proxy.

The schema's CEL rules make ``kubectl apply`` reject bad input with a message that names the field
and the rule; what a schema cannot know (does the Secret exist, is the key file a service-account
key) the operator reports as a condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field, field_validator, model_validator

from gatehouse_contract.header_names import (
    API_KEY_HEADER_RESERVED_RE2,
    CONNECTION_HEADER_RESERVED_RE2,
    TOKEN_PUNCTUATION,
    canonical_name,
    reserved_for_api_key,
    reserved_for_connection_header,
)
from gatehouse_contract.routes import (
    AWS_NAME_PATTERN,
    AWS_SIGNING_HEADERS,
    MAX_AUTHORIZATION_PARAMETERS,
    MAX_CACHE_BODY_BYTES,
    MAX_CACHE_SECONDS,
    Authorization,
    AwsSigning,
    CacheScope,
    Credential,
    PausingStatus,
    TokenRequest,
    WebIdentity,
)

# The proxy's lists of auth types and client authentications are the one lists; the operator's
# models use them as they are.
from gatehouse_contract.routes import AuthType as AuthType
from gatehouse_contract.routes import ClientAuthentication as ClientAuthentication
from gatehouse_contract.routes import CredentialScope as CredentialScope
from gatehouse_contract.routes import PayloadSigning as PayloadSigning
from gatehouse_operator.api.meta import (
    DNS_SUBDOMAIN,
    SEALED_VALUE,
    Kind,
    Model,
    PrinterColumn,
    Status,
    ready_columns,
)
from gatehouse_operator.api.upstream_tls import (
    MAX_SEALED_CERTIFICATE_CHARS,
    TLS_NEEDS_HTTPS,
    ClientCertificateSummary,
    UpstreamTlsSettings,
)
from gatehouse_operator.api.url_fields import (
    AUTHORIZATION_URL,
    BASE_URL,
    CODE_TOKEN_URL,
    REVOCATION_URL,
    TOKEN_URL,
    UrlField,
)
from gatehouse_operator.cel import cel, validations

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
HTTP_METHODS: tuple[HttpMethod, ...] = get_args(HttpMethod)
AUTH_TYPES: tuple[AuthType, ...] = get_args(AuthType)
# What a connection's auth is when its spec names none (the schema's default).
DEFAULT_AUTH_TYPE: AuthType = "none"
CLIENT_AUTHENTICATIONS: tuple[ClientAuthentication, ...] = get_args(ClientAuthentication)
DEFAULT_CLIENT_AUTHENTICATION: ClientAuthentication = "basic"
CREDENTIAL_SCOPES: tuple[CredentialScope, ...] = get_args(CredentialScope)
# Each viewer connects their own account unless the connection says it shares one.
DEFAULT_CREDENTIAL_SCOPE: CredentialScope = "viewer"
PAYLOAD_SIGNINGS: tuple[PayloadSigning, ...] = get_args(PayloadSigning)
# A request's body is hashed into its signature unless the connection says otherwise.
DEFAULT_PAYLOAD_SIGNING: PayloadSigning = "signed"
# Where an API key is sent.
KeyPlacement = Literal["header", "query"]
KEY_PLACEMENTS: tuple[KeyPlacement, ...] = get_args(KeyPlacement)
# The wizard offers a header first; the schema has no default (it asks for one or the other).
FIRST_KEY_PLACEMENT: KeyPlacement = "header"
LinkPolicy = Literal["AdminsOnly", "Builders"]
LINK_POLICIES: tuple[LinkPolicy, ...] = get_args(LinkPolicy)
DEFAULT_LINK_POLICY: LinkPolicy = "AdminsOnly"
# What a connection allows when its spec names no methods (the schema's default).
DEFAULT_METHODS: tuple[HttpMethod, ...] = ("GET",)

MAX_INSTRUCTIONS = 10_000
# As the reference: a browser loads public images straight from the origin, without the
# credential, so they belong to connections that have none; such a connection may serve images
# alone (img-src) and no fetches.
PUBLIC_IMAGES_NEED_NO_AUTH = (
    "allowPublicImages is allowed only with auth.type none: browsers load the images straight "
    "from the origin, without the connection's credential"
)
NO_METHODS_ONLY_FOR_IMAGES = (
    "allowedMethods must name at least one method, unless allowPublicImages is true "
    "(an image-only connection, which serves images and no fetches)"
)
# A sealed service-account key file (the largest credential, 16 KiB at most) stays below this.
MAX_SEALED_CHARS = 32_768
_HEADER_TOKEN = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"  # noqa: S105 (RFC 9110 token, not a secret)


class SecretKeyRef(Model):
    """A key of a Secret in the connection's own namespace."""

    name: str = Field(max_length=253, pattern=DNS_SUBDOMAIN, description="The Secret's name.")
    key: str = Field(
        max_length=253, pattern=r"^[-._a-zA-Z0-9]+$", description="The key within its data."
    )


# Read as servers read header names (every character other than a letter or digit as "-"), the
# rule is gatehouse_contract.header_names': the proxy's and the operator's alike.
_RESERVED_KEY_HEADER = (
    "auth.apiKey.name must not be a header the proxy or HTTP itself controls: read with every "
    "character other than a letter or digit as '-' (as CGI, PHP, WSGI and Rack servers read it), "
    "it must not be hop-by-hop or frame the body (Connection, Transfer-Encoding, Content-Length, "
    "Content-Type, Expect...), be a header the proxy drops from apps or keeps for itself "
    "(Cookie, Proxy-*, X-Gatehouse-*: the viewer's identity it forwards...), or name a host, "
    "URL, scheme, port, method or client address (X-Forwarded-Host, X-Original-URL...)"
)


class ApiKeyAuth(Model):
    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel(
                f"self.__in__ != 'header' || !self.name.matches('{API_KEY_HEADER_RESERVED_RE2}')",
                _RESERVED_KEY_HEADER,
            )
        )
    }

    name: str = Field(
        min_length=1,
        max_length=256,
        pattern=_HEADER_TOKEN,
        description="The header or query parameter the key is sent as.",
    )
    in_: KeyPlacement = Field(
        alias="in", description="Where the key goes: a header or a query parameter."
    )

    @model_validator(mode="after")
    def _not_a_reserved_header(self) -> ApiKeyAuth:
        if self.in_ == "header" and reserved_for_api_key(self.name):
            raise ValueError(_RESERVED_KEY_HEADER)
        return self

    def placed(self, credential: Credential, token_url: str) -> Credential:
        return credential.model_copy(update={"parameter": self.name, "location": self.in_})


_RESERVED_HEADER = (
    "headers[].name must not be a header the proxy or HTTP itself controls: read as servers "
    "read names, not hop-by-hop or Content-Length, not a header the proxy drops from apps "
    "(Authorization: credentials belong in auth, sealed; Cookie, Proxy-*...), not the proxy's "
    "own (X-Gatehouse-*: the viewer's identity it forwards; Gatehouse-Viewer-Assertion), and "
    "not one that names a host, URL, scheme, port, method or client address (X-Forwarded-Host...)"
)
MAX_HEADERS = 20


class HeaderSetting(Model):
    """A header the proxy sends on every request of the connection, in place of the app's."""

    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel(f"!self.name.matches('{CONNECTION_HEADER_RESERVED_RE2}')", _RESERVED_HEADER)
        )
    }

    name: str = Field(
        min_length=1,
        max_length=256,
        pattern=_HEADER_TOKEN,
        description="The header's name, an HTTP token (Notion-Version, X-GitHub-Api-Version).",
    )
    value: str = Field(
        max_length=4096,
        # Visible ASCII and spaces between words: what every server takes in a field value.
        pattern=r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$",
        description="Its value: not a secret (it is shown to app builders); at most 4,096 "
        "printable characters.",
    )

    @model_validator(mode="after")
    def _not_reserved(self) -> HeaderSetting:
        if reserved_for_connection_header(self.name):
            raise ValueError(_RESERVED_HEADER)
        return self


def _canonical_cel(expression: str) -> str:
    """canonical_name in CEL: lower case, each punctuation character of a token read as '-'."""
    expression += ".lowerAscii()"
    for char in TOKEN_PUNCTUATION:
        quoted = "\\'" if char == "'" else char
        expression += f".replace('{quoted}', '-')"
    return expression


# The URL fields: their rules once (api.url_fields), the UrlField kept for the page to read.
BaseUrl = Annotated[str, AfterValidator(BASE_URL.checked), BASE_URL]
TokenUrl = Annotated[str, AfterValidator(TOKEN_URL.checked), TOKEN_URL]
CodeTokenUrl = Annotated[str, AfterValidator(CODE_TOKEN_URL.checked), CODE_TOKEN_URL]
AuthorizationUrl = Annotated[str, AfterValidator(AUTHORIZATION_URL.checked), AUTHORIZATION_URL]
RevocationUrl = Annotated[str, AfterValidator(REVOCATION_URL.checked), REVOCATION_URL]


def url_field_of(metadata: Sequence[object]) -> UrlField | None:
    """The URL field a model field is, from its annotations; None for any other field."""
    return next((item for item in metadata if isinstance(item, UrlField)), None)


Scope = Annotated[str, Field(max_length=512, pattern=r"^(https://\S+|openid|email|profile)$")]


def _path_prefix(field: str) -> Any:
    """A path prefix matched on whole segments: its rules, their messages naming ``field``."""
    return Field(
        max_length=1024,
        pattern=r"^/[^\s?#%\\]*$",
        json_schema_extra=validations(
            cel(
                "!self.split('/').exists(s, s == '..' || s == '.')",
                f"{field} entries must not contain . or .. segments",
            ),
            cel("!self.contains('//')", f"{field} entries must not contain //"),
        ),
    )


PathPrefix = Annotated[str, _path_prefix("allowedPaths")]
CredentialLimitPrefix = Annotated[str, _path_prefix("limits.credentialLimit.pathPrefixes")]


class GoogleServiceAccountAuth(Model):
    scopes: list[Scope] = Field(
        min_length=1,
        max_length=32,
        description="OAuth scopes the access token is requested for.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )

    def placed(self, credential: Credential, token_url: str) -> Credential:
        return credential.model_copy(update={"scopes": tuple(self.scopes)})


# RFC 6749 3.3: a scope token is printable ASCII but space, '"' and '\\'.
OAuthScope = Annotated[
    str, Field(min_length=1, max_length=512, pattern=r"^[\x21\x23-\x5b\x5d-\x7e]+$")
]
# Form parameters the grant itself sets: a connection's extra parameters may not override them.
RESERVED_TOKEN_PARAMETERS = (
    "grant_type",
    "client_id",
    "client_secret",
    "scope",
    "assertion",
    "client_assertion",
    "client_assertion_type",
    "username",
    "password",
    "refresh_token",
    "code",
)
MAX_TOKEN_PARAMETERS = 8
_TOKEN_PARAMETER_NAME = "^[A-Za-z0-9_.-]{1,64}$"  # noqa: S105 (a pattern, not a secret)
TokenParameterName = Annotated[str, Field(pattern=_TOKEN_PARAMETER_NAME)]
TokenParameterValue = Annotated[str, Field(max_length=1024, pattern=r"^[\x20-\x7e]*$")]


# RFC 9110 8.3.1: type "/" subtype, both tokens; "*" only as a whole subtype.
_MEDIA_TOKEN = r"[A-Za-z0-9!#$&^_.+-]+"  # noqa: S105 (RFC 9110 token, not a secret)
MediaRange = Annotated[str, Field(max_length=255, pattern=f"^{_MEDIA_TOKEN}/({_MEDIA_TOKEN}|\\*)$")]


class OAuth2ClientCredentialsAuth(Model):
    """OAuth 2.0 client credentials (RFC 6749 4.4): the proxies ask ``tokenURL`` for an access
    token with the client's id and secret, and send it as ``Authorization: Bearer``."""

    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel(
                "!has(self.parameters) || self.parameters.all(k, "
                f"k.matches('{_TOKEN_PARAMETER_NAME}'))",
                "auth.oauth2ClientCredentials.parameters names are letters, digits, _ . and -, "
                "at most 64",
            ),
            cel(
                "!has(self.parameters) || self.parameters.all(k, !(k.lowerAscii() in "
                f"{list(RESERVED_TOKEN_PARAMETERS)}))",
                "auth.oauth2ClientCredentials.parameters must not set a parameter the grant "
                "sets itself (" + ", ".join(RESERVED_TOKEN_PARAMETERS) + ")",
            ),
        )
    }

    token_url: TokenUrl = TOKEN_URL.field(alias="tokenURL")
    client_id: str = Field(
        alias="clientId",
        min_length=1,
        max_length=512,
        pattern=r"^[\x20-\x7e]+$",
        description="The client's id (not secret); the secret is auth.secretRef or "
        "auth.sealedSecret.",
    )
    scopes: list[OAuthScope] = Field(
        default_factory=list,
        max_length=32,
        description="Scopes the token is asked for (none: the client's default).",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    client_authentication: ClientAuthentication = Field(
        default=DEFAULT_CLIENT_AUTHENTICATION,
        description="How the client authenticates to the token endpoint (RFC 6749 2.3.1): "
        "basic (HTTP Basic, which every server accepts) or body (client_id and client_secret "
        "in the form).",
    )
    parameters: dict[TokenParameterName, TokenParameterValue] = Field(
        default_factory=dict,
        max_length=MAX_TOKEN_PARAMETERS,
        description="Extra form parameters some providers ask for, such as audience or "
        "resource; at most 8, names of letters, digits, _ . and -, values at most 1,024 "
        "printable characters.",
    )

    def placed(self, credential: Credential, token_url: str) -> Credential:
        """``token_url``: this section's ``tokenURL``, normalised (connections.origin)."""
        request = TokenRequest(
            url=token_url,
            client_id=self.client_id,
            client_authentication=self.client_authentication,
            parameters=tuple(self.parameters.items()),
        )
        return credential.model_copy(
            update={"scopes": tuple(self.scopes), "token_request": request}
        )


# Query parameters of the authorization request that OAuth 2.0 (RFC 6749 4.1.1) and PKCE (RFC
# 7636 4.3) set themselves: a connection's extra parameters may not override them.
RESERVED_AUTHORIZATION_PARAMETERS = (
    "response_type",
    "client_id",
    "redirect_uri",
    "state",
    "code_challenge",
    "code_challenge_method",
    "scope",
)
_CODE = "auth.oauth2AuthorizationCode"
_AUTHORIZATION_PARAMETER_NAMES = (
    f"{_CODE}.authorizationParameters names are letters, digits, _ . and -, at most 64"
)
_RESERVED_AUTHORIZATION_PARAMETER = (
    f"{_CODE}.authorizationParameters must not set a parameter OAuth 2.0 or PKCE sets itself ("
    + ", ".join(RESERVED_AUTHORIZATION_PARAMETERS)
    + ")"
)


class OAuth2AuthorizationCodeAuth(Model):
    """OAuth 2.0 authorization code (RFC 6749 4.1) with PKCE S256 (RFC 7636), always: a person
    grants access at ``authorizationURL``, the grant's tokens come from ``tokenURL`` with the
    client's id and secret, and the access token is sent as ``Authorization: Bearer``. Each
    viewer connects their own account, unless ``credentialScope`` is shared."""

    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel(
                "!has(self.authorizationParameters) || self.authorizationParameters.all(k, "
                f"k.matches('{_TOKEN_PARAMETER_NAME}'))",
                _AUTHORIZATION_PARAMETER_NAMES,
            ),
            cel(
                "!has(self.authorizationParameters) || self.authorizationParameters.all(k, "
                f"!(k.lowerAscii() in {list(RESERVED_AUTHORIZATION_PARAMETERS)}))",
                _RESERVED_AUTHORIZATION_PARAMETER,
            ),
        )
    }

    authorization_url: AuthorizationUrl = AUTHORIZATION_URL.field(alias="authorizationURL")
    token_url: CodeTokenUrl = CODE_TOKEN_URL.field(alias="tokenURL")
    client_id: str = Field(
        alias="clientId",
        min_length=1,
        max_length=512,
        pattern=r"^[\x20-\x7e]+$",
        description="The client's id (not secret), as the provider registered it; the secret is "
        "auth.secretRef or auth.sealedSecret. Changing it drops every grant.",
    )
    scopes: list[OAuthScope] = Field(
        default_factory=list,
        max_length=32,
        description="Scopes a person is asked to grant (none: the client's default). Changing "
        "them drops every grant.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    authorization_parameters: dict[TokenParameterName, TokenParameterValue] = Field(
        default_factory=dict,
        max_length=MAX_AUTHORIZATION_PARAMETERS,
        description="Extra query parameters of the authorization request some providers ask "
        "for (access_type: offline, prompt: consent); at most 8, names of letters, digits, _ . "
        "and -, values at most 1,024 printable characters, and none that OAuth 2.0 or PKCE sets "
        "(" + ", ".join(RESERVED_AUTHORIZATION_PARAMETERS) + ").",
    )
    client_authentication: ClientAuthentication = Field(
        default=DEFAULT_CLIENT_AUTHENTICATION,
        description="How the client authenticates to the token endpoint (RFC 6749 2.3.1): "
        "basic (HTTP Basic, which every server accepts) or body (client_id and client_secret "
        "in the form).",
    )
    revocation_url: RevocationUrl | None = REVOCATION_URL.field(alias="revocationURL", default=None)
    credential_scope: CredentialScope = Field(
        default=DEFAULT_CREDENTIAL_SCOPE,
        description="Whose account the proxy calls the API as: viewer (the default: each "
        "viewer connects their own account, and a viewer who has not is asked to) or shared "
        "(an admin connects one account, which every viewer of every linked app then uses).",
    )

    @field_validator("authorization_parameters")
    @classmethod
    def _parameters_not_reserved(cls, parameters: dict[str, str]) -> dict[str, str]:
        if any(name.lower() in RESERVED_AUTHORIZATION_PARAMETERS for name in parameters):
            raise ValueError(_RESERVED_AUTHORIZATION_PARAMETER)
        return parameters

    def placed(self, credential: Credential, token_url: str) -> Credential:
        """``token_url``: this section's ``tokenURL``, normalised (connections.origin); the
        other endpoints were checked by the same rules there."""
        request = TokenRequest(
            url=token_url,
            client_id=self.client_id,
            client_authentication=self.client_authentication,
        )
        authorization = Authorization(
            url=self.authorization_url.strip(),
            parameters=tuple(self.authorization_parameters.items()),
            credential_scope=self.credential_scope,
            revocation_url=(self.revocation_url or "").strip(),
        )
        return credential.model_copy(
            update={
                "scopes": tuple(self.scopes),
                "token_request": request,
                "authorization": authorization,
            }
        )


# An AWS region or signing name is short (us-gov-west-1, execute-api): the pattern bounds it at
# 63 characters, said again for the CEL cost estimate.
_AWS_NAME_CHARS = 63


# An IAM role's ARN (any partition: aws, aws-cn, aws-us-gov...).
ROLE_ARN_PATTERN = r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@/_-]{1,512}$"
# STS's own default for a role's session.
DEFAULT_ROLE_SECONDS = 3600


class AwsWebIdentity(Model):
    """A role's keys, asked of AWS STS with the proxies' own identity: their web identity
    (IRSA), else their EKS Pod Identity role's keys (role chaining). No secret is stored. The
    installation says which roles each namespace may sign as
    (installation.aws.webIdentity.roles)."""

    role_arn: str = Field(
        alias="roleArn",
        max_length=600,
        pattern=ROLE_ARN_PATTERN,
        description="The IAM role the proxies assume (arn:aws:iam::<account>:role/<name>). Its "
        "trust policy must trust the proxies' service account (or, with EKS Pod Identity, the "
        "role associated with it), and may require the session name, which is "
        "<namespace>.<connection name>.",
    )
    duration_seconds: int = Field(
        default=DEFAULT_ROLE_SECONDS,
        alias="durationSeconds",
        ge=900,
        le=43_200,
        description="How long each of the role's keys lives (900 to 43200 seconds, at most the "
        "role's maximum session duration; with EKS Pod Identity at most 3600, AWS's limit for "
        "role chaining); the proxies renew them before they expire.",
    )


class AwsSigV4Auth(Model):
    """AWS Signature Version 4: the proxy signs each request as it sends it (method, path,
    query, headers, the body's hash) for ``region`` and ``service`` with the stored keys, or a
    role's (``webIdentity``); the secret access key never leaves the proxy, only the signature
    does."""

    region: str = Field(
        min_length=1,
        max_length=_AWS_NAME_CHARS,
        pattern=AWS_NAME_PATTERN,
        description="The AWS region requests are signed for, as in the credential scope "
        "(us-east-1, eu-west-1).",
    )
    service: str = Field(
        min_length=1,
        max_length=_AWS_NAME_CHARS,
        pattern=AWS_NAME_PATTERN,
        description="The service's signing name, as in the credential scope: execute-api (API "
        "Gateway), s3, es (OpenSearch), lambda... (not always the host's first label).",
    )
    payload_signing: PayloadSigning = Field(
        default=DEFAULT_PAYLOAD_SIGNING,
        description="signed (the default: the body's SHA-256 is signed) or unsigned "
        "(UNSIGNED-PAYLOAD is signed in its place, for services that accept it, such as S3: "
        "the body is not read twice).",
    )
    web_identity: AwsWebIdentity | None = Field(
        default=None,
        alias="webIdentity",
        description="Sign with a role's keys, asked of AWS STS with the proxies' own identity "
        "(web identity or EKS Pod Identity), in place of stored keys (then neither "
        "auth.secretRef nor auth.sealedSecret).",
    )

    def placed(self, credential: Credential, token_url: str) -> Credential:
        role = self.web_identity
        signing = AwsSigning(
            region=self.region,
            service=self.service,
            payload=self.payload_signing,
            web_identity=None
            if role is None
            else WebIdentity(role_arn=role.role_arn, duration_seconds=role.duration_seconds),
        )
        return credential.model_copy(update={"aws": signing})


class Auth(Model):
    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel(
                "self.type == 'apiKey' ? has(self.apiKey) : !has(self.apiKey)",
                "auth.apiKey (name and in) is required when auth.type is apiKey, and only then",
            ),
            cel(
                "self.type == 'googleServiceAccount'"
                " ? has(self.googleServiceAccount) : !has(self.googleServiceAccount)",
                "auth.googleServiceAccount (scopes) is required when auth.type is "
                "googleServiceAccount, and only then",
            ),
            cel(
                "self.type == 'oauth2ClientCredentials'"
                " ? has(self.oauth2ClientCredentials) : !has(self.oauth2ClientCredentials)",
                "auth.oauth2ClientCredentials (tokenURL, clientId) is required when auth.type is "
                "oauth2ClientCredentials, and only then",
            ),
            cel(
                "self.type == 'oauth2AuthorizationCode'"
                " ? has(self.oauth2AuthorizationCode) : !has(self.oauth2AuthorizationCode)",
                "auth.oauth2AuthorizationCode (authorizationURL, tokenURL, clientId) is required "
                "when auth.type is oauth2AuthorizationCode, and only then",
            ),
            cel(
                "self.type == 'awsSigV4' ? has(self.awsSigV4) : !has(self.awsSigV4)",
                "auth.awsSigV4 (region, service) is required when auth.type is awsSigV4, and "
                "only then",
            ),
            cel(
                "self.type == 'none' || (has(self.awsSigV4) && has(self.awsSigV4.webIdentity))"
                " ? !has(self.secretRef) && !has(self.sealedSecret)"
                " : has(self.secretRef) != has(self.sealedSecret)",
                "exactly one of auth.secretRef and auth.sealedSecret is required for every auth "
                "type except none and awsSigV4 with webIdentity (a role's keys, no stored "
                "secret), and neither is allowed with those",
            ),
        )
    }

    type: AuthType = Field(
        default=DEFAULT_AUTH_TYPE, description="How the proxy authenticates upstream."
    )
    api_key: ApiKeyAuth | None = Field(default=None, description="For type apiKey.")
    google_service_account: GoogleServiceAccountAuth | None = Field(
        default=None, description="For type googleServiceAccount."
    )
    oauth2_client_credentials: OAuth2ClientCredentialsAuth | None = Field(
        default=None, description="For type oauth2ClientCredentials."
    )
    oauth2_authorization_code: OAuth2AuthorizationCodeAuth | None = Field(
        default=None, description="For type oauth2AuthorizationCode."
    )
    aws_sig_v4: AwsSigV4Auth | None = Field(default=None, description="For type awsSigV4.")
    secret_ref: SecretKeyRef | None = Field(
        default=None,
        description="Where the secret is: the API key, the bearer token, user:password for "
        "basic, the OAuth 2.0 client secret (client credentials or authorization code), the "
        "service account's JSON key file, or the AWS keys' JSON for awsSigV4 (AccessKeyId, "
        "SecretAccessKey and, for temporary keys, SessionToken: what aws configure "
        "export-credentials --format process writes). Never copied into this resource.",
    )
    sealed_secret: str | None = Field(
        default=None,
        max_length=MAX_SEALED_CHARS,
        pattern=SEALED_VALUE,
        description="The secret sealed to the operator (gatehouse seal), instead of secretRef: "
        "safe to commit, opened only by the operator, and only for this connection's name, "
        "namespace and baseURL.",
    )


# The largest quotas a connection may set for the credential (the wizard shows them).
MAX_CONNECTION_REQUESTS_PER_MINUTE = 1_000_000
MAX_REQUESTS_PER_DAY = 1_000_000_000
PAUSING_STATUSES: tuple[PausingStatus, ...] = get_args(PausingStatus)
MAX_CREDENTIAL_LIMIT_PREFIXES = 16


class LimitHeader(Model):
    """A response header that marks an answer as the credential's limit."""

    name: str = Field(
        min_length=1,
        max_length=256,
        pattern=_HEADER_TOKEN,
        description="The header's name, an HTTP token (X-RateLimit-Scope).",
    )
    value: str = Field(
        default="",
        max_length=256,
        pattern=r"^([\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?)?$",
        description="Its value, compared without case (account); empty: any value.",
    )


class CredentialLimit(Model):
    """Which of the API's answers that ask to wait (429 or 503 with Retry-After) are the
    credential's own limit: those pause the whole connection for the fleet; any other pauses
    only the endpoint it came on."""

    statuses: list[PausingStatus] = Field(
        default=list(PAUSING_STATUSES),
        min_length=1,
        max_length=len(PAUSING_STATUSES),
        description="The statuses that are the credential's limit: 429, 503 or both (the default).",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    path_prefixes: list[CredentialLimitPrefix] = Field(
        default_factory=list,
        max_length=MAX_CREDENTIAL_LIMIT_PREFIXES,
        description="Only answers on these paths (matched on whole segments, as allowedPaths) "
        "are the credential's limit, or those with header; at most 16. Neither given: every "
        "answer of those statuses is.",
    )
    header: LimitHeader | None = Field(
        default=None,
        description="Only answers carrying this response header (and value, if given) are the "
        "credential's limit, or those on pathPrefixes.",
    )


class Limits(Model):
    timeout_seconds: int = Field(
        default=10, ge=1, le=120, description="Upstream timeout for a whole request."
    )
    max_request_bytes: int = Field(
        default=262_144, ge=0, le=10_485_760, description="Largest request body accepted."
    )
    max_response_bytes: int = Field(
        default=1_048_576,
        ge=1,
        le=26_214_400,
        description="Largest upstream response body; a larger one is refused, not truncated.",
    )
    requests_per_minute: int = Field(
        default=60,
        ge=1,
        le=100_000,
        description="Requests per minute per (connection, app), counted across every proxy "
        "replica and worker (a sliding minute: the whole minute's number may come at once).",
    )
    connection_requests_per_minute: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONNECTION_REQUESTS_PER_MINUTE,
        description="Requests per minute of all apps on this connection together, across "
        "every replica and worker: the vendor's quota for the credential. Unset: none.",
    )
    requests_per_day: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REQUESTS_PER_DAY,
        description="Requests per UTC day of all apps on this connection together, across "
        "every replica and worker, kept across restarts and rollouts. Unset: none.",
    )
    credential_limit: CredentialLimit | None = Field(
        default=None,
        description="Which of the API's 429 or 503 answers with Retry-After are the "
        "credential's limit and pause the whole connection for every app; any other pauses "
        "only the endpoint it came on (the path cut to the longest allowedPaths entry it falls "
        "under, and to at least two segments). Unset: every pause is the endpoint's; empty "
        "({}): every such answer is the credential's.",
    )


# A cache's rules the schema's bounds cannot state, worded once for the CEL rule and the model.
CACHE_TTL_OVER_MAX = "cache.ttlSeconds must be at most cache.maxTTLSeconds"
CACHE_BODY_OVER_RESPONSE = (
    "cache.maxBodyBytes must be at most limits.maxResponseBytes: a larger answer is refused, so "
    "never cached"
)
CACHE_NEEDS_GET = (
    "cache needs GET in allowedMethods: only GET answers are cached, and this "
    "connection allows no GET"
)


class CacheSettings(Model):
    """How long answers are kept, how large, and whose they are."""

    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel("self.ttlSeconds <= self.maxTTLSeconds", CACHE_TTL_OVER_MAX)
        )
    }

    ttl_seconds: int = Field(
        default=60,
        ge=1,
        le=MAX_CACHE_SECONDS,
        description="How many seconds an answer stays fresh when its Cache-Control names no "
        "max-age or s-maxage (the API's own freshness, when it names one, up to maxTTLSeconds).",
    )
    max_ttl_seconds: int = Field(
        default=3_600,
        ge=1,
        le=MAX_CACHE_SECONDS,
        alias="maxTTLSeconds",
        description="The most seconds any answer stays fresh, whatever its max-age or s-maxage "
        "says: a larger one is cut to this.",
    )
    max_body_bytes: int = Field(
        default=262_144,
        ge=1,
        le=MAX_CACHE_BODY_BYTES,
        description="The largest body kept, in bytes (at most limits.maxResponseBytes); a larger "
        "answer is passed on and not cached.",
    )
    scope: CacheScope = Field(
        default="app",
        description="Whose answers an entry serves: app (the default: each app's answers are "
        "its own) or connection (shared between every app linked to the connection). An answer "
        "made with a viewer's own credential (credentialScope viewer) is never shared between "
        "viewers, either way.",
    )
    stale_while_revalidate_seconds: int = Field(
        default=0,
        ge=0,
        le=MAX_CACHE_SECONDS,
        description="How many seconds past fresh an entry may still answer while one request "
        "revalidates it (stale-while-revalidate, RFC 5861); 0: none.",
    )
    stale_if_error_seconds: int = Field(
        default=0,
        ge=0,
        le=MAX_CACHE_SECONDS,
        description="How many seconds past fresh an entry may still answer when the API fails "
        "(stale-if-error, RFC 5861); 0: none.",
    )

    @model_validator(mode="after")
    def _ttl_within_max(self) -> CacheSettings:
        if self.ttl_seconds > self.max_ttl_seconds:
            raise ValueError(CACHE_TTL_OVER_MAX)
        return self


class ExternalConnectionSpec(Model):
    """The API, what apps may ask of it, how the proxy authenticates, and who may link it."""

    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel(
                "!has(self.headers) || self.headers.all(h, "
                "self.headers.exists_one(g, g.name.lowerAscii() == h.name.lowerAscii()))",
                "headers[].name must be unique, whatever its case",
            ),
            cel(
                "!has(self.headers) || !has(self.auth.apiKey) || "
                "self.auth.apiKey.__in__ != 'header' || self.headers.all(h, "
                f"{_canonical_cel('h.name')} != {_canonical_cel('self.auth.apiKey.name')})",
                "headers[].name must not be the API key's own header (auth.apiKey.name), read "
                "as servers read names",
            ),
            cel(
                "!has(self.allowPublicImages) || !self.allowPublicImages "
                "|| self.auth.type == 'none'",
                PUBLIC_IMAGES_NEED_NO_AUTH,
            ),
            cel(
                "!has(self.allowedMethods) || size(self.allowedMethods) > 0 "
                "|| (has(self.allowPublicImages) && self.allowPublicImages)",
                NO_METHODS_ONLY_FOR_IMAGES,
            ),
            cel(
                "!has(self.cache) || self.cache.maxBodyBytes <= self.limits.maxResponseBytes",
                CACHE_BODY_OVER_RESPONSE,
            ),
            cel("!has(self.cache) || 'GET' in self.allowedMethods", CACHE_NEEDS_GET),
            cel(
                "!has(self.tls) || self.baseURL.lowerAscii().startsWith('https://')",
                TLS_NEEDS_HTTPS,
            ),
        )
    }

    display_name: str = Field(
        min_length=1, max_length=128, description="The human-readable name apps see."
    )
    base_url: BaseUrl = BASE_URL.field(alias="baseURL")
    allowed_methods: list[HttpMethod] = Field(
        default=list(DEFAULT_METHODS),
        max_length=len(HTTP_METHODS),
        description="HTTP methods apps may use; none only on an image-only connection "
        "(allowPublicImages), which serves images and no fetches.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    allowed_paths: list[PathPrefix] = Field(
        default_factory=list,
        max_length=64,
        description="Path prefixes apps may call under the base URL, matched on whole "
        "segments (/v1/users allows /v1/users/7, not /v1/users-admin). Empty allows all.",
    )
    auth: Auth = Field(
        description="How calls to the API authenticate, and where the secret is: sealedSecret "
        "(sealed into this resource, safe to commit) or secretRef (a key of a Secret)."
    )
    link_policy: LinkPolicy = Field(
        description="Who may link the connection: AdminsOnly, or Builders (data app and "
        "chart type builders too)."
    )
    allow_public_images: bool = Field(
        default=False,
        description="Let linked apps load images straight from the origin (<img>, CSS). "
        "Only for trusted public image or tile hosts, and only with auth.type none: a browser "
        "loads them without the credential.",
    )
    instructions: str = Field(
        default="",
        max_length=MAX_INSTRUCTIONS,
        description="Markdown notes for app builders and the app generator.",
    )
    headers: list[HeaderSetting] = Field(
        default_factory=list,
        max_length=MAX_HEADERS,
        description="Headers sent on every request, replacing the app's of the same name (read "
        "as servers read names): versions and other values vendors require (Notion-Version, "
        "X-GitHub-Api-Version, anthropic-version). Not secret: app builders see them. At most "
        "20.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    allowed_content_types: list[MediaRange] = Field(
        default_factory=list,
        max_length=32,
        description="Media types an answer may have (type/subtype, or type/* for every "
        "subtype), compared without parameters or case with the type a browser reads in the "
        "answer's Content-Type (the last of several); an answer of another type, or of none a "
        "browser can read, is refused (502 content_type_not_allowed) and a test shows the type "
        "it got. Empty allows any.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    forward_viewer_identity: bool = Field(
        default=False,
        description="Send the API who is asking: the app's id (namespace/Kind/name), the "
        "viewer's id and e-mail, and the project's id (the namespace), in X-Gatehouse-App-Id, "
        "X-Gatehouse-Viewer-Id, X-Gatehouse-Viewer-Email (when the viewer has one) and "
        "X-Gatehouse-Project-Id. Every request must then carry the viewer's assertion "
        "(Gatehouse-Viewer-Assertion), signed by an issuer the installation trusts "
        "(viewers.issuers) for the app that sends it, or is refused (401). Off by default.",
    )
    # The empty default lets the API server fill in each limit's default, so the stored
    # object shows the limits in force.
    limits: Limits = Field(
        default_factory=Limits,
        json_schema_extra={"default": {}},
        description="Bounds on each request through the proxy: time, sizes and rate.",
    )
    cache: CacheSettings | None = Field(
        default=None,
        description="A response cache for the connection's GET answers, shared by "
        "every proxy replica and worker: identical requests made while one is on its way wait "
        "for its answer (one call to the API for the whole fleet), and later ones are answered "
        "from the cache while it is fresh. Never cached: an answer marked no-store or private, "
        "one that sets a cookie (Set-Cookie) or has Vary: *, one larger than maxBodyBytes, and "
        "any answer to another method. A stale answer with an ETag or Last-Modified is "
        "revalidated with a conditional request (a 304 refreshes it). A hit does not reach the "
        "API and is not counted in the connection's quota. Purge with gatehouse cache purge "
        "(it sets the annotation gatehouse.dev/cache-purged-at). Unset: nothing is cached.",
    )
    tls: UpstreamTlsSettings | None = Field(
        default=None,
        description="TLS to the API beyond the defaults: a client certificate (mTLS) from a "
        "kubernetes.io/tls Secret or sealed, beside any auth type; CAs of a private or "
        "enterprise CA the API's certificate may chain to; whether the system's roots apply "
        "too. Needs an https:// baseURL. Host names are always verified. Unset: the system's "
        "roots, no client certificate.",
    )

    @model_validator(mode="after")
    def _headers_apart(self) -> ExternalConnectionSpec:
        api_key = self.auth.api_key
        key_header = api_key.name if api_key and api_key.in_ == "header" else ""
        clashes = header_clashes(
            [header.name for header in self.headers],
            key_header,
            aws_signed=self.auth.type == "awsSigV4",
        )
        if clashes:
            raise ValueError(min(clashes.items())[1])
        return self

    @model_validator(mode="after")
    def _cache_fits(self) -> ExternalConnectionSpec:
        if self.cache is None:
            return self
        if self.cache.max_body_bytes > self.limits.max_response_bytes:
            raise ValueError(CACHE_BODY_OVER_RESPONSE)
        if "GET" not in self.allowed_methods:
            raise ValueError(CACHE_NEEDS_GET)
        return self

    @model_validator(mode="after")
    def _tls_over_https(self) -> ExternalConnectionSpec:
        if self.tls is not None and not self.base_url.strip().lower().startswith("https://"):
            raise ValueError(TLS_NEEDS_HTTPS)
        return self

    @model_validator(mode="after")
    def _images_apart(self) -> ExternalConnectionSpec:
        problem = image_rule_problem(
            self.auth.type, self.allow_public_images, bool(self.allowed_methods)
        )
        if problem:
            raise ValueError(problem)
        return self


def image_rule_problem(auth_type: AuthType | None, public_images: bool, has_methods: bool) -> str:
    """The image-only rules the schema's CEL holds, for the page to tell before it applies."""
    if public_images and auth_type != "none":
        return PUBLIC_IMAGES_NEED_NO_AUTH
    if not has_methods and not public_images:
        return NO_METHODS_ONLY_FOR_IMAGES
    return ""


_AWS_SIGNED = frozenset(canonical_name(name) for name in AWS_SIGNING_HEADERS)


def header_clashes(
    names: Sequence[str], api_key_header: str = "", *, aws_signed: bool = False
) -> dict[int, str]:
    """The headers, by index, that another before them names already or that are the API key's
    own header (or, ``aws_signed``, one the AWS signature is sent in: the proxy would send both),
    read as servers read names: the rule of ExternalConnectionSpec, per header (the wizard shows
    each next to its row)."""
    key = canonical_name(api_key_header) if api_key_header else None
    seen: set[str] = set()
    found = {}
    for index, name in enumerate(names):
        canonical = canonical_name(name)
        if canonical in seen:
            found[index] = (
                "headers[].name must be unique, read as servers read names (X-Foo, x_foo)"
            )
        elif canonical == key:
            found[index] = "headers[].name must not be the API key's own header (auth.apiKey.name)"
        elif aws_signed and canonical in _AWS_SIGNED:
            found[index] = (
                "headers[].name must not be one the AWS signature sends (X-Amz-Date, "
                "X-Amz-Content-Sha256, X-Amz-Security-Token): the proxy signs each request"
            )
        seen.add(canonical)
    return found


class ExternalConnectionStatus(Status):
    """What the operator checked of the connection, and whether the proxy routes it."""

    origin: str = Field(
        default="", max_length=2048, description="The normalised origin requests are pinned to."
    )
    has_secret: bool = Field(
        default=False,
        description="Whether a credential is resolved. The secret itself is never shown.",
    )
    resealed_secret: str = Field(
        default="",
        max_length=MAX_SEALED_CHARS,
        description="spec.auth.sealedSecret sealed again with the installation's active sealing "
        "key, when it was sealed with an older one (gatehouse reseal writes it into your files); "
        "empty when it is current. The same value, for the same connection: never the secret.",
    )
    client_certificate: ClientCertificateSummary | None = Field(
        default=None,
        description="The client certificate the proxy presents (spec.tls.clientCertificate): "
        "its subject, issuer and expiry; never its key.",
    )
    resealed_client_certificate: str = Field(
        default="",
        max_length=MAX_SEALED_CERTIFICATE_CHARS,
        description="spec.tls.clientCertificate.sealed sealed again with the installation's "
        "active sealing key, when it was sealed with an older one (gatehouse reseal writes it "
        "into your files); empty when it is current. The same certificate and key, for the same "
        "connection and use: never the key itself.",
    )


EXTERNAL_CONNECTION = Kind(
    kind="ExternalConnection",
    plural="externalconnections",
    description="A third-party HTTP API that linked apps may call through the Gatehouse proxy, "
    "which pins the host, enforces methods and paths, and injects the credential.",
    spec=ExternalConnectionSpec,
    status=ExternalConnectionStatus,
    short_names=("xconn", "xc"),
    columns=[
        PrinterColumn("Base URL", ".spec.baseURL"),
        PrinterColumn("Auth", ".spec.auth.type"),
        PrinterColumn("Link Policy", ".spec.linkPolicy", priority=1),
        *ready_columns(),
    ],
)
