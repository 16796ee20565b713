"""People's accounts connected to ``oauth2AuthorizationCode`` connections, the operator's part:
each step is asked of a proxy replica on the table channel (gatehouse_contract.connecting), which
holds the grants, the shared store and the client secrets; this module says who may ask what.

- ``begin`` and ``finish`` take no Kubernetes user: the link (minted from a verified viewer's
  assertion, single-use) and the browser's state cookie are what bind them.
- The shared account's link, the list of who connected and a revocation are for those who may
  manage the connection (update on it): what a viewer of the page may not do.

A bounded number of steps are in flight at once, per namespace and in all: the connect pages need
no sign-in, and one tenant's flood (or its provider's slow token endpoint, which a callback
waits on) must not hold every other tenant's connects or pages. A step over either bound is
refused at once (503), never queued.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Mapping

from gatehouse_contract.connecting import (
    CALLBACK_PATH,
    CONNECT_PATH,
    Action,
    GrantsAnswered,
    GrantsAsked,
    GrantsSummary,
    namespace_of_flow,
)
from gatehouse_operator.access.reviews import User
from gatehouse_operator.connections.actions import Connections
from gatehouse_operator.connections.errors import Refused
from gatehouse_operator.table.channel import NoReplica, OutcomeUnknown

AUTHORIZATION_CODE = "oauth2AuthorizationCode"
# How long a step may take: a code exchange is the provider's token request (10 s) and the store;
# a description is the store's alone, and a page waits for it.
STEP_SECONDS = 20.0
DESCRIBE_SECONDS = 5.0
MOST_IN_FLIGHT = 64
MOST_IN_FLIGHT_PER_NAMESPACE = 8
# A replica's refusal, by its code: the page's status.
_STATUS = {
    "connect_unknown": 410,
    "connect_failed": 409,
    "token_endpoint_failed": 502,
    "connection_unavailable": 503,
}


def credential_scope(auth: Mapping[str, object]) -> str:
    """Whose account a connection's spec.auth calls the API as (viewer, the default, or shared)."""
    section = auth.get(AUTHORIZATION_CODE)
    scope = section.get("credentialScope") if isinstance(section, Mapping) else None
    return scope if isinstance(scope, str) else "viewer"


class Grants:
    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        self.runtime = connections.runtime
        self._in_flight: Counter[str] = Counter()

    @property
    def redirect_uri(self) -> str:
        """What a vendor's OAuth client registers as its redirect URI."""
        return f"{self.runtime.settings.page_url}{CALLBACK_PATH}"

    async def begin(self, flow: str) -> GrantsAnswered:
        """Spends a connect link: the vendor's authorization URL and the state to keep."""
        return await self._ask(
            namespace_of_flow(flow), "begin", flow=flow, redirect_uri=self.redirect_uri
        )

    async def finish(self, state: str, code: str) -> GrantsAnswered:
        return await self._ask(
            namespace_of_flow(state),
            "finish",
            flow=state,
            code=code,
            redirect_uri=self.redirect_uri,
        )

    async def shared_link(self, user: User, namespace: str, name: str) -> str:
        """A link to connect the connection's shared account, for one who may manage it."""
        await self._may_manage(user, namespace, name, shared=True)
        answered = await self._ask(namespace, "link", connection=f"{namespace}/{name}")
        return f"{self.runtime.settings.page_url}{CONNECT_PATH}#{answered.flow}"

    async def summary(self, user: User, namespace: str, name: str) -> GrantsSummary:
        await self._may_manage(user, namespace, name)
        answered = await self._ask(
            namespace, "describe", DESCRIBE_SECONDS, connection=f"{namespace}/{name}"
        )
        return answered.summary or GrantsSummary()

    async def revoke(self, user: User, namespace: str, name: str, owner: str = "") -> int:
        """Drops one person's grant (``owner``: its digest, as the summary lists it) or every
        grant of the connection; answers how many went."""
        await self._may_manage(user, namespace, name)
        answered = await self._ask(namespace, "drop", connection=f"{namespace}/{name}", owner=owner)
        return answered.dropped

    async def _may_manage(
        self, user: User, namespace: str, name: str, shared: bool = False
    ) -> None:
        found, can_manage = await self.connections.visible(user, namespace, name)
        if not can_manage:
            raise Refused(
                403,
                "forbidden",
                f"{user.name} may not update externalconnections/{name} in namespace "
                f"{namespace}: connected accounts are the connection's managers'",
            )
        auth = found.spec.auth
        if auth.get("type") != AUTHORIZATION_CODE:
            raise Refused(
                409, "invalid_request", f"connection {name} does not use {AUTHORIZATION_CODE}"
            )
        if shared and credential_scope(auth) != "shared":
            raise Refused(
                409,
                "invalid_request",
                f"connection {name} uses each viewer's own account (credentialScope: viewer): "
                "each viewer connects through the app's link",
            )

    async def _ask(
        self, namespace: str, action: Action, within: float = STEP_SECONDS, **fields: str
    ) -> GrantsAnswered:
        if not self.runtime.settings.page_url:
            raise Refused(
                503,
                "not_configured",
                "this installation names no page URL (operator.page.url): connecting accounts "
                "needs the redirect URI made of it",
            )
        in_flight = self._in_flight
        if (
            in_flight.total() >= MOST_IN_FLIGHT
            or in_flight[namespace] >= MOST_IN_FLIGHT_PER_NAMESPACE
        ):
            raise Refused(503, "busy", "too many accounts are being connected at once: try again")
        asked = GrantsAsked.model_validate({"id": secrets.token_hex(8), "action": action, **fields})
        in_flight[namespace] += 1
        try:
            answered = await self.runtime.channel.ask_grants(asked, within)
        except (NoReplica, OutcomeUnknown) as error:
            raise Refused(503, "proxy_unavailable", f"{error}: try again") from None
        finally:
            in_flight[namespace] -= 1
            if not in_flight[namespace]:
                del in_flight[namespace]
        if answered.problem is not None:
            problem = answered.problem
            raise Refused(_STATUS.get(problem.code, 502), problem.code, problem.message)
        return answered
