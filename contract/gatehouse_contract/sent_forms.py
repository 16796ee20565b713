"""How the proxy writes a secret into what it sends, and so the forms the secret is sent in.

Each way of sending a secret is written here once, and gives both what goes on the wire and the
forms of the secret in it: the value as its receiver reads it, and each encoding of it the sending
wrote (an API key in the query percent-encoded; an OAuth 2.0 client secret form-encoded, then in
HTTP Basic's base64). The senders send ``value`` and scrub exactly ``forms``, and the scrubber
(:class:`~gatehouse_contract.redaction.Redactor`) reads one encoding more of each, so a form the
proxy sends a secret in cannot be missing from what it scrubs.

Which way each auth kind sends its stored secret is said here too, once (:func:`secret_sent`):
the proxy's injectors and token requests send what it gives, and the operator scrubs a connection
test's answer of :func:`forms_of`, so that a new kind's forms are declared in one place for both
programs.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import assert_never
from urllib.parse import quote, quote_plus

from gatehouse_contract.aws_keys import AwsKeys, AwsKeysError
from gatehouse_contract.routes import Credential, TokenRequest


@dataclass(frozen=True)
class Sent:
    value: str  # as it goes on the wire
    forms: tuple[str, ...]  # the secret's forms in it, the value as its receiver reads it first


def _sent(value: str, *forms: str) -> Sent:
    return Sent(value, tuple(dict.fromkeys(form for form in forms if form)))


def bearer(token: str) -> Sent:
    """``Authorization: Bearer`` (RFC 6750): the token as it is."""
    return _sent(f"Bearer {token}", token)


def basic(user_password: str) -> Sent:
    """``Authorization: Basic`` (RFC 7617): ``user:password`` in base64, not form-encoded. The
    password alone is a form too: an upstream may echo the part it checked."""
    encoded = base64.b64encode(user_password.encode()).decode()
    return _sent(f"Basic {encoded}", user_password, encoded, user_password.partition(":")[2])


def header_value(secret: str) -> Sent:
    """An API key as a header's value: as it is."""
    return _sent(secret, secret)


def query_value(secret: str) -> Sent:
    """An API key as a query parameter's value: percent-encoded, every reserved character."""
    quoted = quote(secret, safe="")
    return _sent(quoted, secret, quoted)


def form_field(secret: str) -> Sent:
    """A value in an ``application/x-www-form-urlencoded`` body: ``+`` for a space, the rest of
    what is not a letter, a digit or ``_.-~`` percent-encoded."""
    encoded = quote_plus(secret)
    return _sent(encoded, secret, encoded)


def form_body(fields: Mapping[str, str]) -> bytes:
    """A form body, each value as :func:`form_field` writes it (the names are no secret)."""
    return "&".join(
        f"{quote_plus(name)}={form_field(value).value}" for name, value in fields.items()
    ).encode()


def client_basic(client_id: str, secret: str) -> Sent:
    """An OAuth 2.0 client's HTTP Basic (RFC 6749 2.3.1): the id and the secret each
    form-encoded, then the pair in base64."""
    field = form_field(secret)
    encoded = base64.b64encode(f"{quote_plus(client_id)}:{field.value}".encode()).decode()
    return _sent(f"Basic {encoded}", *field.forms, encoded)


def client_secret(request: TokenRequest, secret: str) -> Sent:
    """An OAuth 2.0 client secret as its token request sends it: in HTTP Basic, or as a field of
    the form body (RFC 6749 2.3.1), as the request's client authentication says."""
    if request.client_authentication == "basic":
        return client_basic(request.client_id, secret)
    return form_field(secret)


NOT_SENT = Sent("", ())


def aws_session_token(token: str) -> Sent:
    """Temporary AWS keys' session token, in ``X-Amz-Security-Token``: as it is. (The secret
    access key is never sent: it signs. A signature is scrubbed as each request's own.)"""
    return _sent(token, token) if token else NOT_SENT


def _aws_keys(secret: str) -> AwsKeys | None:
    try:
        return AwsKeys.parse(secret)
    except AwsKeysError:
        return None


def secret_sent(credential: Credential, secret: str) -> Sent:
    """How the credential's kind sends its stored secret; :data:`NOT_SENT` where it sends none
    of it: no credential, or a service account's key, which signs a token request and is not
    sent. Every kind is named (mypy holds the match to every ``AuthType``)."""
    match credential.type:
        case "none" | "googleServiceAccount":
            return NOT_SENT
        case "apiKey":
            return query_value(secret) if credential.location == "query" else header_value(secret)
        case "bearer":
            return bearer(secret)
        case "basic":
            return basic(secret)
        # An authorization code's client secret goes to the token endpoint as a client
        # credentials one does (exchanging the code, refreshing a grant).
        case "oauth2ClientCredentials" | "oauth2AuthorizationCode":
            request = credential.token_request
            return client_secret(request, secret) if request is not None else NOT_SENT
        case "awsSigV4":
            keys = _aws_keys(secret)
            return NOT_SENT if keys is None else aws_session_token(keys.session_token)
        case unknown:
            assert_never(unknown)


def _held_parts(credential: Credential, secret: str) -> tuple[str, ...]:
    """Parts of a stored secret that are secret on their own though never sent: a service
    account key file's private key, AWS keys' secret access key."""
    if credential.type == "awsSigV4":
        keys = _aws_keys(secret)
        return () if keys is None else (keys.secret_access_key,)
    if credential.type != "googleServiceAccount":
        return ()
    with contextlib.suppress(ValueError, AttributeError):
        return (str(json.loads(secret).get("private_key", "")),)
    return ()


def forms_of(credential: Credential, secret: str) -> tuple[str, ...]:
    """Every form of a connection's stored secret to scrub from what comes back: the secret as
    stored, every form its kind sends it in (:func:`secret_sent`), and its parts secret on their
    own."""
    forms = (secret, *secret_sent(credential, secret).forms, *_held_parts(credential, secret))
    return tuple(dict.fromkeys(form for form in forms if form))
