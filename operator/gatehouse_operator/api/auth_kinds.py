"""The auth kinds as the operator knows them: the one place each kind's operator-side facts live.

Each ``spec.auth.type`` is one row: its title on the wizard's page, its section of ``spec.auth``
(the model on :class:`~gatehouse_operator.api.connection.Auth`, which says how the section becomes
the routing table's ``Credential``), what its secret is (the checks it gets before it is encrypted,
the key the wizard keeps it under), and whether the secret goes to an endpoint of its own (a token
URL, on behalf of a client id: who may send it there, and what a sealed value is bound to). The
code that used to branch over the kinds asks the row instead
(docs/development/adding-an-auth-kind.md lists what a new kind still touches).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from gatehouse_contract.routes import Credential
from gatehouse_operator.api.connection import Auth, AuthType

# What a kind's secret is, and so the checks it gets before it is encrypted
# (keys.credentials.encrypt_credential): a line of text (a key, a token, a client secret),
# ``user:password``, a Google service account's JSON key file, or AWS keys' JSON
# (gatehouse_contract.aws_keys).
SecretShape = Literal["none", "text", "userPassword", "serviceAccountKey", "awsKeys"]

# What a section whose secret goes to an endpoint of its own names it by, as the spec spells them.
ENDPOINT_FIELDS = ("tokenURL", "clientId")


class Section(Protocol):
    """A kind's section of ``spec.auth``: what it adds to the routing table's credential."""

    def placed(self, credential: Credential, token_url: str) -> Credential:
        """``credential`` with the section's placement (a parameter, scopes, a token request);
        ``token_url``: the section's own endpoint, normalised, for a kind that has one."""
        ...


class TokenEndpoint(Section, Protocol):
    """A section whose kind sends the secret to an endpoint of its own, for a client."""

    @property
    def token_url(self) -> str: ...

    @property
    def client_id(self) -> str: ...


@dataclass(frozen=True)
class AuthKind:
    type: AuthType
    title: str  # the wizard's choice, in words
    shape: SecretShape  # what its secret is
    # Its section's key on spec.auth; empty for a kind that has none.
    section: str = ""
    # The key of the Secret the wizard keeps a new connection's secret under.
    stored_as: str = "token"
    # Whether the secret goes to the section's tokenURL, on behalf of its clientId, rather than
    # to baseURL (ENDPOINT_FIELDS).
    token_endpoint: bool = False
    # The section's other endpoints, as the spec spells them: held to tokenURL's rules and the
    # installation's scheme rule (connections.origin), though the secret is not sent to them.
    endpoints: tuple[str, ...] = ()
    # The section in the service API's description of auth.
    described: str = ""
    # What the secret is, in words: on the wizard's page, and in the service API's description.
    named: str = ""
    named_in_api: str = ""

    def section_of(self, auth: Auth) -> Section | None:
        if not self.section:
            return None
        section: Section | None = getattr(auth, _ATTRIBUTES[self.section])
        return section


# The kinds, in the order the wizard offers them.
AUTH_KINDS: Mapping[AuthType, AuthKind] = {
    kind.type: kind
    for kind in (
        AuthKind("none", "None (a public API)", shape="none"),
        AuthKind(
            "apiKey",
            "API key",
            shape="text",
            section="apiKey",
            described="apiKey",
            named="the API key",
            named_in_api="the API key",
        ),
        AuthKind(
            "bearer",
            "Bearer token",
            shape="text",
            named="bearer token",
            named_in_api="bearer token",
        ),
        AuthKind(
            "basic",
            "Basic (user name and password)",
            shape="userPassword",
            named="basic auth's password",
            named_in_api="user:password (basic)",
        ),
        AuthKind(
            "oauth2ClientCredentials",
            "OAuth 2.0 client credentials",
            shape="text",
            section="oauth2ClientCredentials",
            token_endpoint=True,
            described="oauth2ClientCredentials (tokenURL, clientId, scopes, "
            "clientAuthentication, parameters)",
            named="the OAuth 2.0 client secret",
            named_in_api="OAuth 2.0 client secret",
        ),
        AuthKind(
            "oauth2AuthorizationCode",
            "OAuth 2.0 authorization code (each viewer's own account)",
            shape="text",
            section="oauth2AuthorizationCode",
            token_endpoint=True,
            endpoints=("authorizationURL", "revocationURL"),
            described="oauth2AuthorizationCode (authorizationURL, tokenURL, clientId, scopes, "
            "authorizationParameters, clientAuthentication, revocationURL, credentialScope)",
            named="the OAuth 2.0 client secret",
            named_in_api="OAuth 2.0 client secret",
        ),
        AuthKind(
            "googleServiceAccount",
            "Google service account",
            shape="serviceAccountKey",
            section="googleServiceAccount",
            stored_as="key.json",
            described="googleServiceAccount",
            named="the service account's JSON key file",
            named_in_api="service account key file",
        ),
        AuthKind(
            "awsSigV4",
            "AWS Signature Version 4",
            shape="awsKeys",
            section="awsSigV4",
            stored_as="aws-keys.json",
            described="awsSigV4 (region, service, payloadSigning)",
            # The page takes the access key id and session token in fields of their own.
            named="the AWS secret access key",
            named_in_api="AWS keys JSON (AccessKeyId, SecretAccessKey, SessionToken, as aws "
            "configure export-credentials --format process writes it)",
        ),
    )
}

# The sections of the kinds whose secret goes to an endpoint of their own (tokenURL, clientId).
ENDPOINT_SECTIONS = tuple(kind.section for kind in AUTH_KINDS.values() if kind.token_endpoint)

# The kinds with fields of their own on the wizard's page (web/templates/auth/<type>.html), in
# the order it shows them.
FORM_SECTIONS: tuple[AuthType, ...] = (
    "apiKey",
    "googleServiceAccount",
    "oauth2ClientCredentials",
    "oauth2AuthorizationCode",
    "basic",
    "awsSigV4",
)

# Each section's attribute on Auth, by its key in the spec.
_ATTRIBUTES = {field.alias: name for name, field in Auth.model_fields.items() if field.alias}


def kind_of(auth: Auth) -> AuthKind:
    return AUTH_KINDS[auth.type]


def section_of(auth: Auth) -> Section | None:
    """The section of ``auth``'s own kind, if it has one."""
    return kind_of(auth).section_of(auth)


def token_endpoint_of(auth: Auth) -> TokenEndpoint | None:
    """The section naming where ``auth``'s secret goes instead of baseURL, if its kind sends it
    to an endpoint of its own."""
    kind = kind_of(auth)
    if not kind.token_endpoint:
        return None
    endpoint: TokenEndpoint | None = getattr(auth, _ATTRIBUTES[kind.section])
    return endpoint


def described_sections() -> str:
    """The sections, as the service API describes auth: in the order Auth declares them."""
    order = list(_ATTRIBUTES)
    kinds = [kind for kind in AUTH_KINDS.values() if kind.section]
    return ", ".join(kind.described for kind in sorted(kinds, key=lambda k: order.index(k.section)))


def secrets_shown() -> str:
    """What the secret may be, as the wizard's Secret field says it."""
    return _listed([kind.named for kind in AUTH_KINDS.values() if kind.shape != "none"], ", or ")


def secrets_described() -> str:
    """What the secret may be, as the service API describes it."""
    return _listed(
        [kind.named_in_api for kind in AUTH_KINDS.values() if kind.shape != "none"], " or "
    )


def _listed(words: list[str], last: str) -> str:
    words = list(dict.fromkeys(words))  # two kinds may take the same secret (a client secret)
    return ", ".join(words[:-1]) + last + words[-1]
