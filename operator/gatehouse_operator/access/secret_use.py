"""Who may make a connection send a Secret's value.

A connection's credential goes to its ``baseURL``: whoever chooses the Secret, or the origin a
Secret's value is sent to, chooses who receives that value. The operator reads Secrets with its
own rights, so without a check here ``update`` on connections would be ``get`` on every Secret of
the namespace: point ``secretRef`` at any Secret and ``baseURL`` at your own host, then test.
So a change that sets ``secretRef``, changes it, or moves a connection that has one to another
``baseURL`` (or, for OAuth 2.0 client credentials, another ``tokenURL`` or ``clientId``: the
client secret goes to the token endpoint), or trusts other CAs for its vendor (``spec.tls``: a CA
of one's own is a host of one's own on the vendor's name) is admitted only for a requester who
may ``get`` that Secret themselves.

The Secrets ``spec.tls`` names (a client certificate's, a CA bundle's) are held to the same rule
(``tls_secrets_to_read``): naming one, or changing baseURL while one is named.

Changes that keep both (limits, paths, instructions, the link policy, the auth's own settings)
need nothing more than RBAC already asks: the value still goes only where its reader sent it.
"""

from __future__ import annotations

from pydantic import JsonValue

from gatehouse_operator.api.auth_kinds import ENDPOINT_FIELDS, ENDPOINT_SECTIONS
from gatehouse_operator.api.stored import StoredConnectionSpec
from gatehouse_operator.api.upstream_tls import DEFAULT_CA_KEY

READ_VERB = "get"


def _secret_ref(spec: StoredConnectionSpec | None) -> dict[str, JsonValue] | None:
    ref = spec.auth.get("secretRef") if spec is not None else None
    return ref if isinstance(ref, dict) else None


def secret_to_read(
    old_spec: StoredConnectionSpec | None, new_spec: StoredConnectionSpec
) -> tuple[str, str] | None:
    """The Secret the requester must be allowed to ``get`` for this change, and the field that
    makes it so; None when the change needs nothing more. ``old_spec`` is None for a create."""
    ref = _secret_ref(new_spec)
    if ref is None:
        return None
    name = str(ref.get("name", ""))
    if old_spec is None or _secret_ref(old_spec) != ref:
        return name, "spec.auth.secretRef"
    if old_spec.base_url != new_spec.base_url:
        return name, "spec.baseURL"
    # Whom the proxy takes for the vendor is who receives the value: a CA of one's own (and the
    # system's roots turned off) is a host of one's own on the vendor's name.
    if _trust(old_spec) != _trust(new_spec):
        return name, "spec.tls"
    # An OAuth 2.0 client secret goes to the token URL, on behalf of the client id: so does the
    # secret of every kind with an endpoint of its own.
    for section in ENDPOINT_SECTIONS:
        old_client, new_client = _section(old_spec, section), _section(new_spec, section)
        for field in ENDPOINT_FIELDS:
            if old_client.get(field) != new_client.get(field):
                return name, f"spec.auth.{section}.{field}"
    return None


def _trust(spec: StoredConnectionSpec) -> tuple[JsonValue, ...]:
    """What spec.tls says the vendor's certificate may chain to."""
    tls = spec.tls if isinstance(spec.tls, dict) else {}
    return (tls.get("caBundle"), tls.get("caBundleRef"), tls.get("systemRoots", True))


def _tls_refs(spec: StoredConnectionSpec | None) -> dict[str, tuple[str, str]]:
    """The Secrets spec.tls names, by field: its client certificate's and its CA bundle's, each
    with the key read of it (another key of the same Secret is another value, as for
    auth.secretRef: a cert-manager Secret holds tls.key beside ca.crt)."""
    tls = spec.tls if spec is not None and isinstance(spec.tls, dict) else {}
    certificate = tls.get("clientCertificate")
    refs = {
        "spec.tls.clientCertificate.secretRef": (
            certificate.get("secretRef") if isinstance(certificate, dict) else None
        ),
        "spec.tls.caBundleRef": tls.get("caBundleRef"),
    }
    return {
        field: (str(ref.get("name", "")), str(ref.get("key") or DEFAULT_CA_KEY))
        for field, ref in refs.items()
        if isinstance(ref, dict) and ref.get("name")
    }


def tls_secrets_to_read(
    old_spec: StoredConnectionSpec | None, new_spec: StoredConnectionSpec
) -> list[tuple[str, str]]:
    """The Secrets of spec.tls the requester must be allowed to ``get`` for this change, each
    with the field that makes it so: a client certificate's key signs for the connection at its
    baseURL, and a CA bundle decides whom it trusts, so naming one, or moving the connection to
    another baseURL while one is named, is admitted only for a requester who may read it."""
    old_refs, moved = (
        _tls_refs(old_spec),
        (old_spec is not None and old_spec.base_url != new_spec.base_url),
    )
    needed = []
    for field, (name, key) in _tls_refs(new_spec).items():
        if old_spec is None or old_refs.get(field) != (name, key):
            needed.append((name, field))
        elif moved:
            needed.append((name, "spec.baseURL"))
    return needed


def _section(spec: StoredConnectionSpec, section: str) -> dict[str, JsonValue]:
    client = spec.auth.get(section)
    return client if isinstance(client, dict) else {}


def secret_refusal(user: str, namespace: str, secret: str, field: str) -> str:
    """Why the change is refused, naming the field and the rule."""
    return (
        f"{field}: {user} may not get Secret {secret!r} in namespace {namespace}: a connection "
        "sends its Secret's value to its baseURL (an OAuth 2.0 client secret to its tokenURL), "
        "so setting or changing auth.secretRef, or changing baseURL, tokenURL or clientId while "
        "it is set, needs the right to read that Secret"
    )
