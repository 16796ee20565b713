"""A stored connection's auth settings, read leniently (as ``api.stored`` reads the rest): what
the wizard starts an edit from, and compares an edit with to decide whether the stored secret
is kept. Each part missing reads as empty, with the schema's defaults."""

from __future__ import annotations

from pydantic import Field

from gatehouse_operator.api.connection import Auth, OAuth2ClientCredentialsAuth
from gatehouse_operator.api.connection_document import SecretRefDocument
from gatehouse_operator.api.stored import Stored, StoredConnectionSpec

# The wizard offers a header first; the schema has no default (it asks for one or the other).
_FIRST_PLACE = "header"


class StoredApiKey(Stored):
    name: str = ""
    in_: str = Field(default=_FIRST_PLACE, alias="in")


class StoredGoogleServiceAccount(Stored):
    scopes: list[str] = Field(default_factory=list)


class StoredOAuth2(Stored):
    token_url: str = Field(default="", alias="tokenURL")
    client_id: str = ""
    scopes: list[str] = Field(default_factory=list)
    client_authentication: str = OAuth2ClientCredentialsAuth.model_fields[
        "client_authentication"
    ].default
    parameters: dict[str, str] = Field(default_factory=dict)


class StoredSecretRef(Stored):
    name: str = ""
    key: str = ""

    def document(self) -> SecretRefDocument:
        return {"name": self.name, "key": self.key}


class StoredAuth(Stored):
    type: str = Auth.model_fields["type"].default
    api_key: StoredApiKey = Field(default_factory=StoredApiKey)
    google_service_account: StoredGoogleServiceAccount = Field(
        default_factory=StoredGoogleServiceAccount
    )
    oauth2_client_credentials: StoredOAuth2 = Field(default_factory=StoredOAuth2)
    secret_ref: StoredSecretRef | None = None
    sealed_secret: str = ""

    @classmethod
    def of(cls, spec: StoredConnectionSpec) -> StoredAuth:
        return cls.model_validate(spec.auth)
