"""SignInRequest: a command-line user asks to open the page as themselves, with no token to paste.

As cert-manager's CertificateRequest records who asked, a SignInRequest records its requester:
``gatehouse open`` writes the identity the API server gave it (a SelfSubjectReview) with a public
key it made for this request, and the admission webhook refuses the request unless that identity
is exactly the AdmissionReview's userInfo, so no one records another user. The operator answers
in status with a one-time code sealed to the public key (HPKE), which only that command can
open; the page exchanges the code, once and within ``CODE_SECONDS``, for a session that acts as
the requester. The spec is immutable; the operator deletes the request when it is used or late.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gatehouse_operator.api.meta import Kind, Model, PrinterColumn, Status
from gatehouse_operator.api.stored import Stored
from gatehouse_operator.cel import cel, validations

# How long a code may be exchanged after the operator issued it.
CODE_SECONDS = 60
# Requests of one user waiting in one namespace: more are refused at admission, so no one
# fills etcd with them; the operator deletes each when used or late.
MAX_PENDING_PER_USER = 5
# An X25519 public key: 32 bytes, base64url without padding.
PUBLIC_KEY_PATTERN = r"^[A-Za-z0-9_-]{43}$"
MAX_GROUPS = 64
MAX_NAME_CHARS = 512
MAX_EXTRA_KEYS = 16
Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]


class Requester(Model):
    """Who asked, as the API server authenticated them (the AdmissionReview's userInfo)."""

    username: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="The user's name.")
    uid: str = Field(default="", max_length=MAX_NAME_CHARS, description="The user's uid, if any.")
    groups: list[Name] = Field(
        default_factory=list, max_length=MAX_GROUPS, description="The user's groups."
    )
    extra: dict[str, list[Name]] = Field(
        default_factory=dict,
        max_length=MAX_EXTRA_KEYS,
        description="What else the authenticator said of the user (scopes, credential id).",
    )


class SignInRequestSpec(Model):
    """The requester and the key to seal the code to; immutable."""

    model_config = Model.model_config | {
        "json_schema_extra": validations(
            cel("self == oldSelf", "a SignInRequest is immutable: run `gatehouse open` again"),
        )
    }

    public_key: str = Field(
        pattern=PUBLIC_KEY_PATTERN,
        description="The X25519 public key (base64url, unpadded) the one-time code is sealed "
        "to; its private key never leaves the command that made it.",
    )
    requester: Requester = Field(
        description="The user who created the request, exactly as the API server "
        "authenticated them (the admission webhook refuses any other)."
    )


class SignInRequestStatus(Status):
    """The operator's answer: the code, sealed; its digest; until when it may be used."""

    sealed_code: str = Field(
        default="",
        max_length=1024,
        description="The one-time code, HPKE-sealed to spec.publicKey: readable only by the "
        "command that made the key.",
    )
    code_digest: str = Field(
        default="",
        max_length=64,
        description="SHA-256 of the code's secret, hex: what the page checks the code against.",
    )
    expires_at: str = Field(
        default="",
        json_schema_extra={"format": "date-time"},
        description="After this the code is refused and the request deleted.",
    )
    page_url: str = Field(
        default="",
        max_length=2048,
        description="The page's URL, when the installation names it.",
    )


class SignInRequestMetadata(Stored):
    name: str
    namespace: str
    uid: str = ""
    resource_version: str = ""
    creation_timestamp: str = ""


class StoredSignInRequest(Stored):
    """A SignInRequest as the API server stored it, its spec and status read with the strict
    models (the schema checked them when they were written): a ValidationError for one that
    does not parse, which nobody can sign in with."""

    metadata: SignInRequestMetadata
    spec: SignInRequestSpec
    status: SignInRequestStatus = Field(default_factory=SignInRequestStatus)


SIGN_IN_REQUEST = Kind(
    kind="SignInRequest",
    plural="signinrequests",
    description="A command-line user's request to open the Gatehouse page as themselves; "
    "answered with a one-time code only that command can read.",
    spec=SignInRequestSpec,
    status=SignInRequestStatus,
    columns=[
        PrinterColumn("Requester", ".spec.requester.username"),
        PrinterColumn("Expires", ".status.expiresAt", type="date"),
    ],
)
