"""The connection page's "Connected accounts" (``oauth2AuthorizationCode``), for those who may
manage the connection: how many people connected, when a grant was last refreshed, the
refreshes that failed, who (where the installation records viewers' ids) with a revoke button
each, revoke all, and for a shared account its connect button. Never a token: the replica that
answers reads the grants and says only this."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gatehouse_contract.connecting import OWNER_DIGEST, ConnectedOwner, GrantsSummary
from gatehouse_operator.connections import errors
from gatehouse_operator.connections.grants import AUTHORIZATION_CODE, Grants, credential_scope
from gatehouse_operator.web.guards import Visitor, fields_of, page_refusal

BackTo = Callable[[Visitor, str, str, str], Response]


def _when(seconds: float) -> str:
    if not seconds:
        return "never"
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class Row:
    owner: str
    who: str
    connected: str
    refreshed: str

    @classmethod
    def of(cls, grant: ConnectedOwner) -> Row:
        # Without recorded ids, the digest's start tells two grants apart.
        who = grant.label or f"viewer {grant.owner[:8]}"
        return cls(grant.owner, who, _when(grant.connected_at), _when(grant.refreshed_at))


@dataclass(frozen=True)
class GrantsView:
    shared: bool
    redirect_uri: str
    error: str = ""
    summary: GrantsSummary = field(default_factory=GrantsSummary)
    rows: list[Row] = field(default_factory=list)

    @property
    def last_refresh(self) -> str:
        return _when(self.summary.refreshed_at)


class GrantsSection:
    def __init__(self, grants: Grants, back_to: BackTo) -> None:
        self.grants = grants
        self.back_to = back_to

    async def view(
        self, visitor: Visitor, namespace: str, name: str, auth: Mapping[str, object], manages: bool
    ) -> GrantsView | None:
        """The section, for a connection of the kind and a visitor who may manage it."""
        if auth.get("type") != AUTHORIZATION_CODE or not manages:
            return None
        shared = credential_scope(auth) == "shared"
        try:
            summary = await self.grants.summary(visitor.user, namespace, name)
        except errors.Refused as refused:
            return GrantsView(shared, self.grants.redirect_uri, error=refused.message)
        rows = [Row.of(grant) for grant in summary.listed]
        return GrantsView(shared, self.grants.redirect_uri, summary=summary, rows=rows)

    async def revoke(self, request: Request, visitor: Visitor) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        owner = str((await fields_of(request)).get("owner", ""))
        if owner and not OWNER_DIGEST.match(owner):
            raise page_refusal(400, "owner: not a connected account of this connection")
        dropped = await self.grants.revoke(visitor.user, namespace, name, owner)
        notice = (
            f"Revoked {dropped} connected account{'s' if dropped != 1 else ''}."
            if not owner
            else "Revoked the account."
            if dropped
            else "That account was not connected."
        )
        return self.back_to(visitor, namespace, name, notice)

    async def connect_shared(self, request: Request, visitor: Visitor) -> Response:
        """To the connect page with a fresh link for the shared account: the admin signs in at
        the provider and consents there."""
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        link = await self.grants.shared_link(visitor.user, namespace, name)
        return RedirectResponse(link, status_code=303)
