"""The connection wizard's form: its fields, the spec they make, and the YAML that would be applied.

One form serves every step: the steps the visitor is not on are hidden, not left out, so each
post carries every field and no step's input is lost on the way between them. The secret is the
exception: it is never rendered back, only kept encrypted (Sessions.encrypt_draft_secret); so is
basic auth's user name, which the secret holds (user:password).

An edit keeps the stored secret only while what it was given for stays: the auth type, the
origin, and an OAuth 2.0 connection's token URL and client id (the reference's rule). Changing
any of them asks for the secret again, so a secret is never sent somewhere its owner did not
send it; a sealed value is bound to the origin, token URL and client id as well.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from typing import Literal, TypeVar

import yaml
from pydantic import JsonValue, ValidationError
from starlette.datastructures import FormData

from gatehouse_contract.aws_keys import AwsKeys, AwsKeysError
from gatehouse_contract.numerals import whole_number
from gatehouse_operator.api.auth_kinds import AUTH_KINDS, AuthKind
from gatehouse_operator.api.connection import (
    AUTH_TYPES,
    CACHE_NEEDS_GET,
    DEFAULT_AUTH_TYPE,
    DEFAULT_CLIENT_AUTHENTICATION,
    DEFAULT_CREDENTIAL_SCOPE,
    DEFAULT_METHODS,
    DEFAULT_PAYLOAD_SIGNING,
    DEFAULT_ROLE_SECONDS,
    FIRST_KEY_PLACEMENT,
    HTTP_METHODS,
    KEY_PLACEMENTS,
    MAX_CONNECTION_REQUESTS_PER_MINUTE,
    MAX_REQUESTS_PER_DAY,
    NO_METHODS_ONLY_FOR_IMAGES,
    PUBLIC_IMAGES_NEED_NO_AUTH,
    AuthType,
    ClientAuthentication,
    CredentialScope,
    ExternalConnectionSpec,
    HeaderSetting,
    KeyPlacement,
    LinkPolicy,
    PayloadSigning,
    header_clashes,
    image_rule_problem,
)
from gatehouse_operator.api.connection_document import (
    AuthDocument,
    AwsSigV4Document,
    AwsWebIdentityDocument,
    ConnectionSpecDocument,
    ConnectionSpecOptions,
    OAuth2CodeDocument,
    OAuth2Document,
    SecretRefDocument,
)
from gatehouse_operator.api.connection_test import (
    DEFAULT_TEST_METHOD,
    DEFAULT_TEST_PATH,
    SAMPLE_LABEL_CHARS,
)
from gatehouse_operator.api.meta import first_problem
from gatehouse_operator.api.stored import StoredAuth, StoredConnection, StoredConnectionSpec
from gatehouse_operator.connections.drafts import manifest
from gatehouse_operator.connections.origin import OriginError, normalise_origin, normalise_token_url
from gatehouse_operator.connections.saving import SECRET_SUFFIX
from gatehouse_operator.keys.sealed_values import Scope
from gatehouse_operator.kube import WATCHED_SELECTOR
from gatehouse_operator.web.field_problems import FieldProblems, FieldTitle, field_at, range_of

STEPS = ("api", "auth", "access", "test", "review")
STEP_TITLES = {
    "api": "API",
    "auth": "Authentication",
    "access": "Access",
    "test": "Test",
    "review": "Review",
}
# The choices in words, in the order the page offers them (api.auth_kinds; test_wizard checks
# that every allowed value has one).
AUTH_TYPE_TITLES: dict[AuthType, str] = {kind.type: kind.title for kind in AUTH_KINDS.values()}
CLIENT_AUTHENTICATION_TITLES: dict[ClientAuthentication, str] = {
    "basic": "HTTP Basic (every server accepts it)",
    "body": "In the form body (client_id and client_secret)",
}
CREDENTIAL_SCOPE_TITLES: dict[CredentialScope, str] = {
    "viewer": "Each viewer connects their own account",
    "shared": "One account an admin connects, used for every viewer",
}
KEY_PLACEMENT_TITLES: dict[KeyPlacement, str] = {"header": "a header", "query": "the query"}
PAYLOAD_SIGNING_TITLES: dict[PayloadSigning, str] = {
    "signed": "Signed (the body's hash)",
    "unsigned": "Unsigned (UNSIGNED-PAYLOAD, for services that accept it, such as S3)",
}
# Whose keys sign an AWS connection's requests: stored ones (the secret), or a role's, asked of
# AWS STS with the proxies' own identity (auth.awsSigV4.webIdentity, no secret).
AwsKeysFrom = Literal["keys", "role"]
AWS_KEYS_FROM: dict[AwsKeysFrom, str] = {
    "keys": "Stored keys (an access key id and its secret access key)",
    "role": "A role: the proxies ask AWS STS for its keys with their own identity; nothing "
    "is stored",
}
LINK_POLICY_TITLES: dict[LinkPolicy, str] = {
    "AdminsOnly": "Admins only",
    "Builders": "Data app and chart type builders",
}
# The limits in words, for the page (their values are shown in their units: rendering.limit).
LIMIT_TITLES = {
    "timeoutSeconds": "Timeout",
    "maxRequestBytes": "Largest request body",
    "maxResponseBytes": "Largest answer",
    "requestsPerMinute": "Requests per minute, per app",
    "connectionRequestsPerMinute": "Requests per minute, all apps together",
    "requestsPerDay": "Requests per UTC day, all apps together",
    "credentialLimit": "The credential's limit (pauses the whole connection): the API's",
}
# The limits the wizard shows (the vendor's quotas for the credential), with their largest
# value; the others stay as stored.
SHOWN_LIMITS = {
    "connectionRequestsPerMinute": (
        LIMIT_TITLES["connectionRequestsPerMinute"],
        MAX_CONNECTION_REQUESTS_PER_MINUTE,
    ),
    "requestsPerDay": (LIMIT_TITLES["requestsPerDay"], MAX_REQUESTS_PER_DAY),
}
_CODE = "auth.oauth2AuthorizationCode"
_AWS = "auth.awsSigV4"
_ROLE_ARN = "a role's ARN such as arn:aws:iam::123456789012:role/payments"
# The page's fields by the spec's paths (and its own, for what the spec has not), titled as the
# page shows them, in the order their problems are listed: the one table from the model's and
# the API server's field names to the page's.
FIELDS = (
    FieldTitle("displayName", "Display name"),
    # The resource's name, which the API server alone checks.
    FieldTitle("metadata.name", "Resource name"),
    FieldTitle("baseURL", "Base URL"),
    FieldTitle(
        "allowedMethods",
        "Allowed methods",
        reworded={
            NO_METHODS_ONLY_FOR_IMAGES: f"at least one of {', '.join(HTTP_METHODS)}, or none for "
            "an image-only connection (Allow public images, with auth type none)"
        },
    ),
    FieldTitle("allowPublicImages", "Allow public images"),
    FieldTitle("forwardViewerIdentity", "Send the viewer's identity"),
    FieldTitle("allowedPaths", "Allowed paths", lines=True, what="a path prefix such as /v1/users"),
    FieldTitle("headers", "Headers", rows=True),
    FieldTitle(
        "allowedContentTypes",
        "Allowed content types",
        lines=True,
        what="a media type such as application/json or text/*",
    ),
    FieldTitle("tls", "TLS to the API"),
    FieldTitle("tls.clientCertificate", "Client certificate Secret"),
    FieldTitle("tls.caBundle", "CA bundle"),
    FieldTitle("tls.systemRoots", "Trust only the CA bundle"),
    FieldTitle("sampleLabel", "Sample label"),
    FieldTitle("instructions", "Instructions"),
    *(FieldTitle(f"limits.{key}", title) for key, (title, _) in SHOWN_LIMITS.items()),
    FieldTitle("cache", "Cache answers"),
    FieldTitle("cache.ttlSeconds", "Cache answers: fresh for (seconds)"),
    # The schema's rules across the auth section's fields, which the API server alone checks.
    FieldTitle("auth", STEP_TITLES["auth"]),
    FieldTitle("auth.type", "Auth type", offered=tuple(AUTH_TYPE_TITLES)),
    FieldTitle("storage", "Keep the secret"),
    FieldTitle("auth.apiKey.in", "API key: sent in", offered=tuple(KEY_PLACEMENT_TITLES)),
    FieldTitle(
        "auth.oauth2ClientCredentials.clientAuthentication",
        "OAuth 2.0: client authentication",
        offered=tuple(CLIENT_AUTHENTICATION_TITLES),
    ),
    FieldTitle(
        f"{_CODE}.clientAuthentication",
        "OAuth 2.0 authorization code: client authentication",
        offered=tuple(CLIENT_AUTHENTICATION_TITLES),
    ),
    FieldTitle(f"{_CODE}.credentialScope", "Whose account", offered=tuple(CREDENTIAL_SCOPE_TITLES)),
    FieldTitle(
        f"{_AWS}.payloadSigning", "AWS: payload signing", offered=tuple(PAYLOAD_SIGNING_TITLES)
    ),
    FieldTitle("awsKeysFrom", "AWS: keys"),
    FieldTitle("linkPolicy", "Who can link it", offered=tuple(LINK_POLICY_TITLES)),
    FieldTitle("auth.apiKey.name", "Parameter name"),
    FieldTitle("auth.apiKey", "Parameter name"),
    FieldTitle("auth.googleServiceAccount.scopes", "Scopes", lines=True),
    FieldTitle("auth.oauth2ClientCredentials.tokenURL", "Token URL"),
    FieldTitle("auth.oauth2ClientCredentials.clientId", "Client id"),
    FieldTitle("auth.oauth2ClientCredentials.scopes", "Scopes"),
    FieldTitle("auth.oauth2ClientCredentials.parameters", "Extra token parameters", lines=True),
    FieldTitle(f"{_CODE}.authorizationURL", "Authorization URL"),
    FieldTitle(f"{_CODE}.tokenURL", "Token URL"),
    FieldTitle(f"{_CODE}.clientId", "Client id"),
    FieldTitle(f"{_CODE}.scopes", "Scopes"),
    FieldTitle(f"{_CODE}.authorizationParameters", "Extra authorization parameters", lines=True),
    FieldTitle(f"{_CODE}.revocationURL", "Revocation URL"),
    FieldTitle(
        f"{_AWS}.region",
        "AWS: region",
        what="a region such as us-east-1 (lower case letters, digits and -)",
    ),
    FieldTitle(
        f"{_AWS}.service",
        "AWS: service",
        what="a signing name such as execute-api or s3 (lower case letters, digits and -)",
    ),
    FieldTitle(
        f"{_AWS}.webIdentity.roleArn",
        "AWS: role ARN",
        what=_ROLE_ARN,
        # The pattern alone holds it (no minimum length): an empty one is a missing one.
        reworded={f"'' is not {_ROLE_ARN}": "required for a role by web identity"},
    ),
    FieldTitle(f"{_AWS}.webIdentity.durationSeconds", "AWS: role's keys live (seconds)"),
    FieldTitle("secret", "Secret"),
)
# The step that shows each of FIELDS (by its path, or the path of a section holding it): a step
# left with Next is checked for its own fields' problems, named there next to each field.
STEP_FIELDS = {
    "api": (
        "displayName",
        "metadata.name",
        "baseURL",
        "allowedMethods",
        "allowedPaths",
        "headers",
        "allowedContentTypes",
        "tls",
    ),
    "auth": ("auth", "awsKeysFrom", "storage", "secret"),
    "access": (
        "linkPolicy",
        "allowPublicImages",
        "forwardViewerIdentity",
        "instructions",
        "limits",
        "cache",
    ),
    "test": ("sampleLabel",),
}


def step_of(path: str) -> str:
    """The step that shows the field at ``path`` (one of FIELDS); review for any other."""
    return next(
        (
            step
            for step, paths in STEP_FIELDS.items()
            for shown in paths
            if path == shown or path.startswith(f"{shown}.")
        ),
        "review",
    )


# What a section's fields are required for.
AUTH_SECTIONS = {
    "auth.apiKey": "an API key",
    "auth.googleServiceAccount": "a Google service account",
    "auth.oauth2ClientCredentials": "OAuth 2.0",
    _CODE: "OAuth 2.0 authorization code",
    _AWS: "AWS Signature Version 4",
}
# Empty header rows offered beyond the filled ones (the page needs no script to add rows).
SPARE_HEADER_ROWS = 2
# Where the credential is kept: a Secret the wizard writes, or sealed to the operator in the
# connection itself (what a GitOps team commits; the default in read-only mode).
Storage = Literal["sealed", "secret"]
STORAGES: dict[Storage, str] = {
    "sealed": "Sealed into the connection (safe to commit to Git)",
    "secret": "In a Secret of this namespace",
}


def first_storage(*, read_only: bool, can_seal: bool) -> Storage:
    """Where a new connection's secret goes unless the admin picks the other way: sealed into
    the connection wherever the installation has sealing keys (where the seed kept its secrets
    encrypted at rest; a Secret is read by anyone with ``edit``), and always on a read-only
    page, whose YAML teams commit; a Secret otherwise."""
    return "sealed" if read_only or can_seal else "secret"


_NAME_CHARS = re.compile(r"[^a-z0-9]+")

Choice = TypeVar("Choice", bound=str)


def one_of(allowed: Collection[Choice], text: str) -> Choice | None:
    """The allowed value the text is, typed as its api type (so a misspelt comparison is mypy's
    error); None when it is none of them. A form keeps what was posted, for the page to show back
    and problems() to name."""
    return next((value for value in allowed if value == text), None)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _words(text: str) -> list[str]:
    return text.split()


def origin_of(base_url: str) -> str:
    """The origin as the operator pins it, or the text as written when it is none."""
    try:
        return normalise_origin(base_url, allow_http=True)
    except OriginError:
        return base_url.strip()


def _token_url(token_url: str) -> str:
    try:
        return normalise_token_url(token_url, allow_http=True)
    except OriginError:
        return token_url.strip()


def _rule(error: ValidationError) -> str:
    return first_problem(error)[1].removeprefix("Value error, ")


def _pairs(text: str) -> tuple[dict[str, str], list[str]]:
    """name=value lines, and the lines that are not name=value."""
    found: dict[str, str] = {}
    bad = []
    for line in _lines(text):
        key, equals, value = line.partition("=")
        if not equals or not key.strip():
            bad.append(line)
        else:
            found[key.strip()] = value.strip()
    return found, bad


def _tls_secret_name(tls: dict[str, JsonValue]) -> str:
    """The Secret spec.tls.clientCertificate.secretRef names; "" for none."""
    certificate = tls.get("clientCertificate")
    ref = certificate.get("secretRef") if isinstance(certificate, dict) else None
    return str(ref.get("name") or "") if isinstance(ref, dict) else ""


def _pair_lines(pairs: Mapping[str, str]) -> str:
    """name=value lines, as _pairs reads them."""
    return "\n".join(f"{key}={value}" for key, value in pairs.items())


def basic_secret(user: str, password: str) -> tuple[str | None, str]:
    """Basic auth's secret as the Secret holds it, user:password, from the two fields; or None
    and what is wrong. Neither given: nothing entered ("", no problem)."""
    if not user.strip() and not password.strip():
        return None, ""
    if not user.strip() or not password.strip():
        return None, "User name and password: enter both for basic authentication"
    if ":" in user or any(ord(char) < 0x20 or ord(char) == 0x7F for char in user):
        return None, "User name: no colon or control characters (RFC 7617)"
    return f"{user.strip()}:{password}", ""


# The page's titles of the fields AWS keys are entered in, by the JSON's names.
_AWS_KEY_TITLES = {
    "AccessKeyId": "Access key id",
    "SecretAccessKey": "Secret access key",
    "SessionToken": "Session token",
}


def aws_secret(
    access_key_id: str, secret_access_key: str, session_token: str
) -> tuple[str | None, str]:
    """AWS keys as the Secret holds them (the JSON aws_keys reads) from the three fields; or
    None and what is wrong, naming the field, never its value. None given: nothing entered."""
    parts = (access_key_id.strip(), secret_access_key.strip(), session_token.strip())
    if not any(parts):
        return None, ""
    if not (parts[0] and parts[1]):
        return None, (
            "Access key id and secret access key: enter both for AWS Signature Version 4 "
            "(the session token too, for temporary keys)"
        )
    stored = AwsKeys(*parts).stored()
    try:
        AwsKeys.parse(stored)
    except AwsKeysError as error:
        problem = str(error)
        for name, title in _AWS_KEY_TITLES.items():
            problem = problem.replace(f'"{name}"', title)
        return None, problem
    return stored, ""


def name_from(display_name: str) -> str:
    """A Kubernetes name for a display name: "Payments API (EU)" becomes payments-api-eu."""
    return _NAME_CHARS.sub("-", display_name.lower()).strip("-")[:63].rstrip("-")


@dataclass(frozen=True)
class WizardForm:
    name: str = ""
    display_name: str = ""
    base_url: str = ""
    allowed_methods: tuple[str, ...] = DEFAULT_METHODS
    allowed_paths: str = ""
    # Filled rows only, in the order given: (name, value).
    headers: tuple[tuple[str, str], ...] = ()
    allowed_content_types: str = ""
    auth_type: str = DEFAULT_AUTH_TYPE
    api_key_name: str = ""
    api_key_in: str = FIRST_KEY_PLACEMENT
    scopes: str = ""
    token_url: str = ""
    client_id: str = ""
    oauth_scopes: str = ""
    client_authentication: str = DEFAULT_CLIENT_AUTHENTICATION
    # One name=value a line.
    token_parameters: str = ""
    # The authorization-code section's own (two OAuth sections on one page, apart).
    code_authorization_url: str = ""
    code_token_url: str = ""
    code_client_id: str = ""
    code_scopes: str = ""
    code_client_authentication: str = DEFAULT_CLIENT_AUTHENTICATION
    # One name=value a line.
    code_parameters: str = ""
    code_revocation_url: str = ""
    credential_scope: str = DEFAULT_CREDENTIAL_SCOPE
    aws_region: str = ""
    aws_service: str = ""
    aws_payload_signing: str = DEFAULT_PAYLOAD_SIGNING
    aws_keys_from: str = "keys"
    aws_role_arn: str = ""
    # As typed: a whole number, or empty for the model's default.
    aws_role_seconds: str = str(DEFAULT_ROLE_SECONDS)
    # No preselected value, as the reference has none: who may link is the admin's choice.
    link_policy: str = ""
    allow_public_images: bool = False
    forward_viewer_identity: bool = False
    instructions: str = ""
    # As typed: a whole number, or empty for none.
    limits: tuple[tuple[str, str], ...] = ()
    # spec.cache on or off, and its ttlSeconds as typed (empty: the default); its other fields
    # stay as stored.
    cache: bool = False
    cache_ttl: str = ""
    # spec.tls: the client certificate's kubernetes.io/tls Secret, a CA bundle (PEM), and
    # whether the system's roots are left out; a sealed certificate or a caBundleRef stays as
    # stored.
    tls_secret: str = ""
    tls_ca_bundle: str = ""
    tls_only_bundle: bool = False
    draft_secret: str = ""
    storage: str = "secret"
    # The secret sealed to the operator for this connection (the page seals an entered one);
    # empty: the stored one, if any.
    sealed_value: str = ""
    # An edit's starting point: the spec as stored (limits, the Secret it names) and its version.
    stored: StoredConnectionSpec = field(default_factory=StoredConnectionSpec)
    resource_version: str = ""
    # The spec's generation the edit started from: a version that differs by the status only
    # (the operator's write) is no change of anyone else's to the spec.
    generation: str = ""
    test_method: str = DEFAULT_TEST_METHOD
    test_path: str = DEFAULT_TEST_PATH
    test_body: str = ""
    # Asked after a passing draft test: the saved connection's sample, from a test on Save; its
    # label is optional, as in the reference.
    save_sample: bool = False
    sample_label: str = ""

    @classmethod
    def posted(cls, fields: FormData, stored: StoredConnectionSpec) -> WizardForm:
        def text(key: str, default: str = "") -> str:
            return str(fields.get(key, default))

        rows = zip_longest(fields.getlist("header_name"), fields.getlist("header_value"))
        headers = tuple((str(name or "").strip(), str(value or "").strip()) for name, value in rows)
        return cls(
            name=text("name").strip(),
            display_name=text("display_name").strip(),
            base_url=text("base_url").strip(),
            allowed_methods=tuple(
                m for m in HTTP_METHODS if m in fields.getlist("allowed_methods")
            ),
            allowed_paths=text("allowed_paths"),
            headers=tuple(row for row in headers if row != ("", "")),
            allowed_content_types=text("allowed_content_types"),
            auth_type=text("auth_type", DEFAULT_AUTH_TYPE),
            api_key_name=text("api_key_name").strip(),
            api_key_in=text("api_key_in", FIRST_KEY_PLACEMENT),
            scopes=text("scopes"),
            token_url=text("token_url").strip(),
            client_id=text("client_id").strip(),
            oauth_scopes=text("oauth_scopes"),
            client_authentication=text("client_authentication", DEFAULT_CLIENT_AUTHENTICATION),
            token_parameters=text("token_parameters"),
            code_authorization_url=text("code_authorization_url").strip(),
            code_token_url=text("code_token_url").strip(),
            code_client_id=text("code_client_id").strip(),
            code_scopes=text("code_scopes"),
            code_client_authentication=text(
                "code_client_authentication", DEFAULT_CLIENT_AUTHENTICATION
            ),
            code_parameters=text("code_parameters"),
            code_revocation_url=text("code_revocation_url").strip(),
            credential_scope=text("credential_scope", DEFAULT_CREDENTIAL_SCOPE),
            aws_region=text("aws_region").strip(),
            aws_service=text("aws_service").strip(),
            aws_payload_signing=text("aws_payload_signing", DEFAULT_PAYLOAD_SIGNING),
            aws_keys_from=text("aws_keys_from", "keys"),
            aws_role_arn=text("aws_role_arn").strip(),
            aws_role_seconds=text("aws_role_seconds", str(DEFAULT_ROLE_SECONDS)).strip(),
            link_policy=text("link_policy"),
            allow_public_images=fields.get("allow_public_images") == "on",
            forward_viewer_identity=fields.get("forward_viewer_identity") == "on",
            instructions=text("instructions").replace("\r\n", "\n"),
            limits=tuple((key, text(key).strip()) for key in SHOWN_LIMITS),
            cache=fields.get("cache") == "on",
            cache_ttl=text("cache_ttl").strip(),
            tls_secret=text("tls_secret").strip(),
            tls_ca_bundle=text("tls_ca_bundle").replace("\r\n", "\n").strip(),
            tls_only_bundle=fields.get("tls_only_bundle") == "on",
            draft_secret=text("draft_secret"),
            storage=text("storage", "secret"),
            stored=stored,
            resource_version=text("resource_version"),
            generation=text("generation"),
            test_method=text("test_method", DEFAULT_TEST_METHOD),
            test_path=text("test_path", DEFAULT_TEST_PATH).strip() or DEFAULT_TEST_PATH,
            test_body=text("test_body"),
            # A label given asks for the sample too, as the field alone did before.
            save_sample=fields.get("save_sample") == "on" or bool(text("sample_label").strip()),
            sample_label=text("sample_label").strip(),
        )

    @classmethod
    def of(cls, connection: StoredConnection, resource_version: str) -> WizardForm:
        """An existing connection, to edit from the version read."""
        spec = connection.spec
        auth = StoredAuth.of(spec)
        oauth2 = auth.oauth2_client_credentials
        code = auth.oauth2_authorization_code
        role = auth.aws_sig_v4.web_identity
        limits = spec.limits
        return cls(
            name=connection.name,
            display_name=spec.display_name,
            base_url=spec.base_url,
            allowed_methods=tuple(spec.allowed_methods),
            allowed_paths="\n".join(spec.allowed_paths),
            headers=tuple((header.name, header.value) for header in spec.headers),
            allowed_content_types="\n".join(spec.allowed_content_types),
            auth_type=auth.type,
            api_key_name=auth.api_key.name,
            api_key_in=auth.api_key.in_,
            scopes="\n".join(auth.google_service_account.scopes),
            token_url=oauth2.token_url,
            client_id=oauth2.client_id,
            oauth_scopes="\n".join(oauth2.scopes),
            client_authentication=oauth2.client_authentication,
            token_parameters=_pair_lines(oauth2.parameters),
            code_authorization_url=code.authorization_url,
            code_token_url=code.token_url,
            code_client_id=code.client_id,
            code_scopes="\n".join(code.scopes),
            code_client_authentication=code.client_authentication,
            code_parameters=_pair_lines(code.authorization_parameters),
            code_revocation_url=code.revocation_url,
            credential_scope=code.credential_scope,
            aws_region=auth.aws_sig_v4.region,
            aws_service=auth.aws_sig_v4.service,
            aws_payload_signing=auth.aws_sig_v4.payload_signing,
            aws_keys_from="keys" if role is None else "role",
            aws_role_arn="" if role is None else role.role_arn,
            aws_role_seconds=str(DEFAULT_ROLE_SECONDS if role is None else role.duration_seconds),
            link_policy=spec.link_policy,
            allow_public_images=spec.allow_public_images,
            forward_viewer_identity=spec.forward_viewer_identity,
            instructions=spec.instructions,
            limits=tuple(
                (key, str(limits[key]) if limits.get(key) is not None else "")
                for key in SHOWN_LIMITS
            ),
            cache=spec.cache is not None,
            cache_ttl=str((spec.cache or {}).get("ttlSeconds") or ""),
            tls_secret=_tls_secret_name(spec.tls or {}),
            tls_ca_bundle=str((spec.tls or {}).get("caBundle") or "").strip(),
            tls_only_bundle=(spec.tls or {}).get("systemRoots") is False,
            storage="sealed" if auth.sealed_secret else "secret",
            stored=spec,
            resource_version=resource_version,
            generation=str(connection.generation),
        )

    @property
    def editing(self) -> bool:
        return bool(self.resource_version)

    @property
    def known_auth_type(self) -> AuthType | None:
        """The auth type, if it is one the schema knows: what the form branches on."""
        return one_of(AUTH_TYPES, self.auth_type)

    @property
    def kind(self) -> AuthKind | None:
        """The auth type's facts, if it is one the schema knows."""
        auth_type = self.known_auth_type
        return AUTH_KINDS[auth_type] if auth_type is not None else None

    @property
    def sends_to_token_endpoint(self) -> bool:
        """Whether the secret goes to the token URL, for the client id, rather than baseURL."""
        return self.kind is not None and self.kind.token_endpoint

    def endpoint(self) -> tuple[str, str]:
        """The token URL and client id the form gives its kind's section (a kind that sends
        its secret to a token endpoint)."""
        if self.known_auth_type == "oauth2AuthorizationCode":
            return self.code_token_url, self.code_client_id
        return self.token_url, self.client_id

    def stored_endpoint(self) -> tuple[str, str]:
        """The stored spec's token URL and client id, in the section of the form's kind."""
        auth = self.stored_auth
        if self.known_auth_type == "oauth2AuthorizationCode":
            code = auth.oauth2_authorization_code
            return code.token_url, code.client_id
        oauth2 = auth.oauth2_client_credentials
        return oauth2.token_url, oauth2.client_id

    @property
    def known_key_placement(self) -> KeyPlacement | None:
        return one_of(KEY_PLACEMENTS, self.api_key_in)

    def named(self) -> WizardForm:
        """With a name made from the display name when none was given."""
        if self.name or self.editing:
            return self
        return replace(self, name=name_from(self.display_name))

    @property
    def signs_by_role(self) -> bool:
        """Whether an AWS connection signs with a role's keys by web identity (no secret)."""
        return self.known_auth_type == "awsSigV4" and self.aws_keys_from == "role"

    @property
    def secretless(self) -> bool:
        """Whether the connection stores no secret: auth type none, or a role's keys."""
        return self.known_auth_type == "none" or self.signs_by_role

    @property
    def sealed(self) -> bool:
        """Whether the credential is sealed into the connection rather than kept in a Secret."""
        return not self.secretless and one_of(STORAGES, self.storage) == "sealed"

    @property
    def secret_entered(self) -> bool:
        return bool(self.draft_secret)

    def changed_for_secret(self) -> list[str]:
        """What an edit changed of what the stored secret was given for (auth type, origin,
        token URL, client id): with any of these changed it is not kept, and must be entered
        again. Empty for a new connection, or one that stores no secret."""
        auth = self.stored_auth
        if not self.editing or not (auth.secret_ref or auth.sealed_secret):
            return []
        changed = []
        if auth.type != self.auth_type:
            changed.append("auth type")
        if origin_of(self.stored.base_url) != origin_of(self.base_url):
            changed.append("base URL")
        if self.sends_to_token_endpoint:
            (stored_url, stored_client), (token_url, client_id) = (
                self.stored_endpoint(),
                self.endpoint(),
            )
            if _token_url(stored_url) != _token_url(token_url):
                changed.append("token URL")
            if stored_client != client_id:
                changed.append("client id")
        return changed

    def stored_sealed(self) -> str:
        """The stored sealed value, while it is kept (see changed_for_secret)."""
        if self.changed_for_secret():
            return ""
        return self.stored_auth.sealed_secret

    def seal_scope(self, namespace: str) -> Scope | None:
        """What a secret sealed into this connection is bound to: its namespace, name and
        origin, and an OAuth 2.0 client secret's token URL and client id; None while one of
        them is not valid yet (unsealable says which)."""
        if self.unsealable() is not None:
            return None
        origin = normalise_origin(self.base_url, allow_http=True)
        if not self.sends_to_token_endpoint:
            return Scope(namespace, self.name, origin)
        token_url, client_id = self.endpoint()
        normalised = normalise_token_url(token_url, allow_http=True)
        return Scope(namespace, self.name, origin, normalised, client_id)

    def unsealable(self) -> tuple[str, str] | None:
        """What keeps a secret from being sealed for this connection: the field (its path in
        FIELDS) and its rule; the operator's origin rules are stricter than the schema's (a
        host name's syntax, numeric hosts), so the dry run would name only the secret missing."""
        if not self.name:
            return "metadata.name", "required, to seal the secret for it"
        try:
            normalise_origin(self.base_url, allow_http=True)
        except OriginError as error:
            return "baseURL", str(error)
        if self.kind is None or not self.kind.token_endpoint:
            return None
        oauth2 = f"auth.{self.kind.section}"
        token_url, client_id = self.endpoint()
        try:
            normalise_token_url(token_url, allow_http=True)
        except OriginError as error:
            return f"{oauth2}.tokenURL", str(error)
        return None if client_id else (f"{oauth2}.clientId", "required for OAuth 2.0")

    @property
    def stored_auth(self) -> StoredAuth:
        """The auth settings of the spec as stored (empty for a new connection)."""
        return StoredAuth.of(self.stored)

    def stored_secret_ref(self) -> SecretRefDocument | None:
        """The Secret the stored spec names, if any."""
        stored = self.stored_auth.secret_ref
        return stored.document() if stored is not None else None

    def secret_ref(self) -> SecretRefDocument | None:
        """Where the credential is: the stored spec's Secret, else one named after the
        connection; None when it stores none (secretless), or seals it into the connection."""
        if self.secretless or self.sealed:
            return None
        kind = self.kind
        stored = self.stored_secret_ref()
        key = kind.stored_as if kind is not None else "token"
        if stored and stored["key"] == key:
            return stored
        return {"name": f"{self.name}{SECRET_SUFFIX}", "key": key}

    def keeps_stored_secret(self) -> bool:
        """An edit that uses the Secret the connection already names, for what it was given
        for: whether it holds a value is the connection's CredentialReady condition to say, not
        the wizard's to look up."""
        ref = self.secret_ref()
        return (
            self.editing
            and ref is not None
            and ref == self.stored_secret_ref()
            and not self.changed_for_secret()
        )

    def with_secret_ref(self, ref: SecretRefDocument) -> WizardForm:
        """With the credential in another Secret (a new one, written on Save)."""
        named: JsonValue = {"name": ref["name"], "key": ref["key"]}
        auth = {**self.stored.auth, "secretRef": named}
        return replace(self, stored=self.stored.model_copy(update={"auth": auth}))

    def token_parameter_pairs(self) -> tuple[dict[str, str], list[str]]:
        """The extra token parameters, and the lines that are not name=value."""
        return _pairs(self.token_parameters)

    def limit(self, key: str) -> str:
        return dict(self.limits).get(key, "")

    def _auth(self) -> AuthDocument:
        auth: AuthDocument = {"type": self.auth_type}
        auth_type = self.known_auth_type
        if auth_type == "apiKey":
            auth["apiKey"] = {"name": self.api_key_name, "in": self.api_key_in}
        if auth_type == "googleServiceAccount":
            auth["googleServiceAccount"] = {"scopes": _lines(self.scopes)}
        if auth_type == "oauth2ClientCredentials":
            oauth2: OAuth2Document = {"tokenURL": self.token_url, "clientId": self.client_id}
            if _words(self.oauth_scopes):
                oauth2["scopes"] = _words(self.oauth_scopes)
            oauth2["clientAuthentication"] = self.client_authentication
            parameters, _ = self.token_parameter_pairs()
            if parameters:
                oauth2["parameters"] = parameters
            auth["oauth2ClientCredentials"] = oauth2
        if auth_type == "oauth2AuthorizationCode":
            auth["oauth2AuthorizationCode"] = self._code()
        if auth_type == "awsSigV4":
            aws: AwsSigV4Document = {
                "region": self.aws_region,
                "service": self.aws_service,
                "payloadSigning": self.aws_payload_signing,
            }
            if self.signs_by_role:
                aws["webIdentity"] = self._role()
            auth["awsSigV4"] = aws
        ref = self.secret_ref()
        if ref is not None:
            auth["secretRef"] = ref
        if self.sealed and (self.sealed_value or self.stored_sealed()):
            auth["sealedSecret"] = self.sealed_value or self.stored_sealed()
        return auth

    def _role(self) -> AwsWebIdentityDocument:
        role: AwsWebIdentityDocument = {"roleArn": self.aws_role_arn}
        if (seconds := whole_number(self.aws_role_seconds)) is not None:
            role["durationSeconds"] = seconds
        return role

    def _code(self) -> OAuth2CodeDocument:
        code: OAuth2CodeDocument = {
            "authorizationURL": self.code_authorization_url,
            "tokenURL": self.code_token_url,
            "clientId": self.code_client_id,
        }
        if _words(self.code_scopes):
            code["scopes"] = _words(self.code_scopes)
        parameters, _ = _pairs(self.code_parameters)
        if parameters:
            code["authorizationParameters"] = parameters
        code["clientAuthentication"] = self.code_client_authentication
        if self.code_revocation_url:
            code["revocationURL"] = self.code_revocation_url
        code["credentialScope"] = self.credential_scope
        return code

    def _limits(self) -> dict[str, JsonValue]:
        """The stored limits, with the shown ones as given (empty: none)."""
        limits = {k: v for k, v in self.stored.limits.items() if k not in SHOWN_LIMITS}
        for key, value in self.limits:
            if (number := whole_number(value)) is not None:
                limits[key] = number
        return limits

    def _cache(self) -> dict[str, JsonValue]:
        """The stored cache, with ttlSeconds as given (empty: the default)."""
        cache = {k: v for k, v in (self.stored.cache or {}).items() if k != "ttlSeconds"}
        if (ttl := whole_number(self.cache_ttl)) is not None:
            cache["ttlSeconds"] = ttl
        return cache

    def _tls(self) -> dict[str, JsonValue]:
        """spec.tls: the stored one's other fields (a sealed certificate, a caBundleRef), with
        the Secret, the CA bundle and the system roots as given; empty: none."""
        stored = dict(self.stored.tls or {})
        tls = {k: v for k, v in stored.items() if k not in ("clientCertificate", "caBundle")}
        tls.pop("systemRoots", None)
        sealed = stored.get("clientCertificate")
        if self.tls_secret:
            tls = {"clientCertificate": {"secretRef": {"name": self.tls_secret}}, **tls}
        elif isinstance(sealed, dict) and sealed.get("sealed"):
            tls = {"clientCertificate": sealed, **tls}
        if self.tls_ca_bundle:
            tls["caBundle"] = self.tls_ca_bundle + "\n"
        if self.tls_only_bundle:
            tls["systemRoots"] = False
        return tls

    def spec(self) -> ConnectionSpecDocument:
        """The ExternalConnection spec these fields make; on an edit, fields the wizard does not
        show (the other limits, the cache's other fields) stay as stored."""
        # In the order the YAML shows the keys (the optional ones among the others).
        asked: ConnectionSpecOptions = {}
        if _lines(self.allowed_paths):
            asked["allowedPaths"] = _lines(self.allowed_paths)
        if self.headers:
            asked["headers"] = [{"name": name, "value": value} for name, value in self.headers]
        if _lines(self.allowed_content_types):
            asked["allowedContentTypes"] = _lines(self.allowed_content_types)
        rest: ConnectionSpecOptions = {}
        if self.allow_public_images:
            rest["allowPublicImages"] = True
        if self.forward_viewer_identity:
            rest["forwardViewerIdentity"] = True
        if self.instructions.strip():
            rest["instructions"] = self.instructions
        limits = self._limits()
        if limits:
            rest["limits"] = limits
        if self.cache:
            rest["cache"] = self._cache()
        if tls := self._tls():
            rest["tls"] = tls
        return {
            "displayName": self.display_name,
            "baseURL": self.base_url,
            "allowedMethods": list(self.allowed_methods),
            **asked,
            "auth": self._auth(),
            "linkPolicy": self.link_policy,
            **rest,
        }

    def header_problems(self) -> dict[int, str]:
        """Each header row's problem, by row, in the schema's words: shown next to the row."""
        found = {}
        for index, (name, value) in enumerate(self.headers):
            try:
                HeaderSetting.model_validate({"name": name, "value": value})
            except ValidationError as error:
                where = first_problem(error)[0]
                rule = _rule(error)
                found[index] = f"headers[].{where}: {rule}" if where else rule
        key_header = self.api_key_name if self.known_auth_type == "apiKey" else ""
        clashes = header_clashes(
            [name for name, _ in self.headers],
            key_header if self.known_key_placement == "header" else "",
        )
        for index, message in clashes.items():
            found.setdefault(index, message)
        return found

    def problems(self) -> list[str]:
        """What the page can tell before the API server is asked, each under its field's title
        (field_problems says how they are found)."""
        return self.field_problems().listed()

    def field_problems(self) -> FieldProblems:
        """The strict model's refusals of the spec these fields make, and what is the page's
        own (its choice of storage, the lines it parses, the secret), by field."""
        found = FieldProblems(ExternalConnectionSpec, FIELDS, AUTH_SECTIONS)
        found.built(self.spec())
        # The choices of the sections the spec holds only for their auth type, named whatever
        # the type (a value the page does not offer is named where it was posted).
        found.checked("auth.apiKey.in", self.api_key_in)
        found.checked(
            "auth.oauth2ClientCredentials.clientAuthentication", self.client_authentication
        )
        found.checked(f"{_CODE}.clientAuthentication", self.code_client_authentication)
        found.checked(f"{_CODE}.credentialScope", self.credential_scope)
        found.checked(f"{_AWS}.payloadSigning", self.aws_payload_signing)
        if one_of(AWS_KEYS_FROM, self.aws_keys_from) is None:
            found.add("awsKeysFrom", f"one of {', '.join(AWS_KEYS_FROM)}")
        seconds = f"{_AWS}.webIdentity.durationSeconds"
        if (
            self.signs_by_role
            and self.aws_role_seconds
            and whole_number(self.aws_role_seconds) is None
        ):
            found.add(seconds, range_of(field_at(ExternalConnectionSpec, seconds)))
        # The model's rules across fields, which it checks only once each field is valid.
        image_rule = image_rule_problem(
            self.known_auth_type, self.allow_public_images, bool(self.allowed_methods)
        )
        if image_rule:
            found.add(
                "allowPublicImages"
                if image_rule == PUBLIC_IMAGES_NEED_NO_AUTH
                else "allowedMethods",
                image_rule,
            )
        for index, message in sorted(self.header_problems().items()):
            found.add(
                "headers", message, f"Header {index + 1} ({self.headers[index][0] or 'no name'})"
            )
        if len(self.sample_label) > SAMPLE_LABEL_CHARS:
            found.add("sampleLabel", f"at most {SAMPLE_LABEL_CHARS} characters")
        for key, value in self.limits:
            if value and whole_number(value) is None:
                found.add(
                    f"limits.{key}", range_of(field_at(ExternalConnectionSpec, f"limits.{key}"))
                )
        if self.cache and self.cache_ttl and whole_number(self.cache_ttl) is None:
            found.add(
                "cache.ttlSeconds", range_of(field_at(ExternalConnectionSpec, "cache.ttlSeconds"))
            )
        if self.cache and "GET" not in self.allowed_methods:
            found.add("cache", CACHE_NEEDS_GET)
        if one_of(STORAGES, self.storage) is None:
            found.add("storage", f"one of {', '.join(STORAGES)}")
        # The chosen kind's name=value lines (the others' fields are not its own).
        pair_fields = {
            "oauth2ClientCredentials": (
                "auth.oauth2ClientCredentials.parameters",
                self.token_parameters,
            ),
            "oauth2AuthorizationCode": (f"{_CODE}.authorizationParameters", self.code_parameters),
        }
        if self.known_auth_type in pair_fields:
            path, text = pair_fields[self.known_auth_type]
            for line in _pairs(text)[1]:
                found.add(path, f"{line!r} is not name=value (one a line)")
        changed = self.changed_for_secret()
        if not self.secretless and changed and not self.secret_entered:
            found.add(
                "secret",
                f"enter it again: the {' and the '.join(changed)} changed, and a stored "
                "secret is kept only while the auth type, base URL, token URL and client id "
                "stay as they were",
            )
        elif self.sealed and not (self.sealed_value or self.stored_sealed() or self.secret_entered):
            # One entered is sealed once what it is sealed for is valid (the base URL's or the
            # token URL's own rule says what is not).
            found.add("secret", "required, to be sealed into the connection")
        elif self.sealed and self.secret_entered and not self.sealed_value:
            # Entered, and not sealed: the field it cannot be sealed for says why, where the
            # model's own rule for it has not.
            unsealable = self.unsealable()
            if unsealable is not None and unsealable[0] not in found.found:
                found.add(*unsealable)
        return found

    def yaml(self, namespace: str) -> str:
        """What would be applied, for teams that commit it to Git; the secret is not in it."""
        spec = self.spec()
        document = manifest(self.name or "my-connection", spec, namespace=namespace).body()
        text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
        if self.sealed:
            bound = "namespace, name and baseURL"
            if self.sends_to_token_endpoint:
                bound = "namespace, name, baseURL,\n# token URL and client id"
            return (
                f"{text}# auth.sealedSecret opens in the operator only, and only for this "
                f"connection's\n# {bound}: safe to commit.\n"
                if "sealedSecret" in spec["auth"]
                else f"{text}# Enter the secret (Authentication) to have it sealed here.\n"
            )
        ref = self.secret_ref()
        if ref is None:
            return text
        pair = {
            "basic": "# as user:password (no colon in the user name),\n",
            "awsSigV4": "# as the JSON of aws configure export-credentials --format process,\n",
        }.get(self.known_auth_type or "", "")
        return (
            f"{text}---\n"
            f"# The credential is never shown. Keep it in Secret {ref['name']}, key {ref['key']},\n"
            f"{pair}# for example (or with your cluster's secret manager), labelled for the "
            "operator's\n# watch so that a rotation reaches the proxy at once:\n"
            f"#   kubectl create secret generic {ref['name']} -n {namespace} "
            f"--from-file={ref['key']}=<file>\n"
            f"#   kubectl label secret {ref['name']} -n {namespace} {WATCHED_SELECTOR}\n"
        )
