"""Connecting a person's account (``oauth2AuthorizationCode``): what the operator's page and a
proxy replica say to each other about grants, on the table channel.

The page is what a browser reaches; the grants, the shared store and the connections' client
secrets are the proxies'. So the page asks a replica (:class:`GrantsAsked`) and shows its answer
(:class:`GrantsAnswered`):

- ``link``: a connect link for a connection's shared account (an admin's, from the page or
  ``gatehouse connect``); a viewer's link is minted by the proxy itself, in the 401 an app gets
  for a viewer without a grant;
- ``begin``: a link is spent (once: a second use, or one past its ten minutes, is refused) for
  the vendor's authorization URL, with a fresh state and PKCE verifier kept in the store for the
  callback; the page shows whose account it connects before the browser goes on;
- ``finish``: the callback's state is spent (once), the redirect URI must be the one it began
  with, the code is exchanged and the grant kept;
- ``drop``: one owner's grant or every grant of a connection, revoked at the provider where the
  connection names a revocation endpoint;
- ``describe``: what the page shows of a connection's grants, never a token.

A link is ``<namespace>.<encrypted>``: what it binds (the connection, the app, the owner) and its
expiry, encrypted with a key derived from the keyring, so that nothing is stored until it is
clicked (an app asking again and again for a viewer who never connects fills nothing); spent, a
marker of its digest is kept in the namespace's share until it would have expired. A state is
``<namespace>.<random>``: 256 random bits the store keeps only a digest of. The namespace names
whose share of the store holds them (every namespace's keys are counted to it).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from gatehouse_contract.connection_tests import Problem
from gatehouse_contract.wire import Count, Instant, Wire

# Where the page takes links and the vendor's redirect back: the redirect URI a vendor's client
# registers is the page's URL and CALLBACK_PATH. A link is the page's CONNECT_PATH with the link's
# id in the fragment, which browsers never send: no access log, proxy or Referer keeps it.
CONNECT_PATH = "/ui/connect"
CALLBACK_PATH = "/ui/connect/callback"
# How long a connect link may wait for its click, and a begun connect for its callback.
LINK_SECONDS = 600
FLOW_SECONDS = 600
# A link's or a state's random part: 32 bytes, base64url.
_RANDOM_PART = r"[A-Za-z0-9_-]{43}"
_NAMESPACE = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
FLOW_ID = re.compile(rf"^{_NAMESPACE}\.{_RANDOM_PART}$")
# A link's encrypted part: its binding (bounded: labels, keys and names), a nonce and a tag.
MAX_ENCRYPTED_CHARS = 2000
LINK_ID = re.compile(rf"^{_NAMESPACE}\.[A-Za-z0-9_-]{{43,{MAX_ENCRYPTED_CHARS}}}$")
MAX_FLOW_CHARS = 63 + 1 + MAX_ENCRYPTED_CHARS
# An owner as the page names it: a digest of whose (never who).
OWNER_DIGEST = re.compile(r"^[0-9a-f]{32}$")
# Well over what providers issue (Google's codes are ~75 characters, Microsoft's ~1,000).
MAX_CODE_CHARS = 4096
MAX_URL_CHARS = 8192
# Connected owners a describe lists, the most recently refreshed first.
MAX_LISTED = 100
MAX_LABEL_CHARS = 320

Action = Literal["link", "begin", "finish", "drop", "describe"]
_NEEDS: dict[str, tuple[str, ...]] = {
    "link": ("connection",),
    "begin": ("flow", "redirect_uri"),
    "finish": ("flow", "code", "redirect_uri"),
    "drop": ("connection",),
    "describe": ("connection",),
}


class GrantsAsked(Wire):
    """What the page asks a replica; answered by a :class:`GrantsAnswered` of the same id."""

    type: Literal["grants"] = "grants"
    id: str = Field(max_length=100)
    action: Action
    # begin: the link's id; finish: the state the vendor sent back.
    flow: str = Field(default="", pattern=LINK_ID.pattern + "|^$", max_length=MAX_FLOW_CHARS)
    code: str = Field(default="", max_length=MAX_CODE_CHARS)
    redirect_uri: str = Field(default="", max_length=2048)
    connection: str = Field(default="", max_length=600)  # namespace/name
    # drop: the owner's digest (as describe lists it); "" drops every grant of the connection.
    owner: str = Field(default="", pattern=r"^([0-9a-f]{32})?$", max_length=32)

    @model_validator(mode="after")
    def _has_what_its_action_needs(self) -> GrantsAsked:
        missing = [name for name in _NEEDS[self.action] if not getattr(self, name)]
        if missing:
            raise ValueError(f"{self.action} needs {', '.join(missing)}")
        return self


class ConnectedOwner(Wire):
    """One grant as the page lists it: whose (an e-mail or a subject, as the viewer's assertion
    gave it; "" where the installation does not record viewers' ids), when connected and last
    refreshed (Unix seconds)."""

    owner: str = Field(pattern=OWNER_DIGEST.pattern, max_length=32)
    label: str = Field(default="", max_length=MAX_LABEL_CHARS)
    connected_at: Instant
    refreshed_at: Instant = 0


class GrantsSummary(Wire):
    connected: Count = 0
    listed: tuple[ConnectedOwner, ...] = Field(default=(), max_length=MAX_LISTED)
    refreshed_at: Instant = 0
    # Refreshes the provider refused or that failed, since the counts began (the store's).
    failures: Count = 0
    last_failure: str = Field(default="", max_length=1000)


class GrantsAnswered(Wire):
    type: Literal["grantsAnswer"] = "grantsAnswer"
    id: str = Field(max_length=100)
    problem: Problem | None = None
    # link: the link's id; begin: the state, for the browser's cookie.
    flow: str = Field(default="", pattern=LINK_ID.pattern + "|^$", max_length=MAX_FLOW_CHARS)
    # begin: the vendor's authorization URL to send the browser to.
    authorization_url: str = Field(default="", max_length=MAX_URL_CHARS)
    # begin, finish: what is being connected, to say so on the page.
    connection: str = Field(default="", max_length=600)
    app: str = Field(default="", max_length=600)
    owner_label: str = Field(default="", max_length=MAX_LABEL_CHARS)
    dropped: Count = 0
    summary: GrantsSummary | None = None


def namespace_of_flow(flow: str) -> str:
    return flow.partition(".")[0]
