"""How the proxy writes a secret into what it sends, and so the forms the secret is sent in.

Each way of sending a secret is written here once, and gives both what goes on the wire and the
forms of the secret in it: the value as its receiver reads it, and each encoding of it the sending
wrote (an API key in the query percent-encoded; an OAuth 2.0 client secret form-encoded, then in
HTTP Basic's base64). The senders send ``value`` and scrub exactly ``forms``, and the scrubber
(:class:`~gatehouse_contract.redaction.Redactor`) reads one encoding more of each, so a form the
proxy sends a secret in cannot be missing from what it scrubs.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, quote_plus


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
