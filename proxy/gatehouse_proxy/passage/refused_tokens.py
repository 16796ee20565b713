"""The 401 judgement: what a 401 to a minted token says (gatehouse_proxy.credentials.
token_refusals), counted per app; the first bound of a window told to the operator (a
``RenewalsBounded`` frame, an Event)."""

from __future__ import annotations

from gatehouse_contract.connection_tests import CONNECTION_TEST_CALLER
from gatehouse_contract.frames import MAX_RENEWALS, RENEWAL_WINDOW_SECONDS, RenewalsBounded
from gatehouse_contract.routes import ConnectionRoute, namespace_of
from gatehouse_proxy.credentials.injectors import Injection, Injector
from gatehouse_proxy.credentials.token_refusals import Judged
from gatehouse_proxy.observation import metrics
from gatehouse_proxy.observation.fetch import Fetch
from gatehouse_proxy.table.feed import TableFeed
from gatehouse_proxy.upstream.forwarder import Upstream


class RefusedTokens:
    def __init__(self, injector: Injector, feed: TableFeed) -> None:
        self.injector = injector
        self.feed = feed

    async def judge(
        self,
        fetch: Fetch,
        connection: ConnectionRoute,
        injection: Injection,
        upstream: Upstream,
        *,
        shared: bool,
    ) -> Judged | None:
        """What the answer's 401 says of the token it was sent with; None when it says nothing
        (not a 401, or no minted token)."""
        if upstream.status != 401:
            return None
        judged = await self.injector.refused(injection, fetch.endpoint, shared=shared)
        if judged is None:
            return None
        caller = fetch.app
        if caller == CONNECTION_TEST_CALLER:
            caller = f"{namespace_of(connection.key)}/ConnectionTest/"
        metrics.count_renewal(metrics.Labels(app=caller, connection=connection.key), judged.verdict)
        if judged.news:
            await self.feed.tell(
                RenewalsBounded(
                    connection=connection.key,
                    renewals=MAX_RENEWALS,
                    seconds=min(max(judged.seconds, 0.0), RENEWAL_WINDOW_SECONDS),
                )
            )
        return judged
