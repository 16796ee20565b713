"""The connect flow's pages: where a viewer's connect link lands, and the vendor's redirect back
(gatehouse_contract.connecting says what each step does; connections.grants asks a replica).

- ``GET /ui/connect#<link>``: a page that takes the link's id out of the address bar; nothing is
  spent until the click, so a link unfurled by a chat client's preview is still good.
- ``POST /ui/connect``: the link is spent, and the page says whose account it connects (the
  viewer the link was made for, the app, the connection) before its "Continue to the provider"
  goes on to the vendor's authorization URL: a link someone forwarded would connect the
  clicker's account to them, and the page says so. The state comes back only with the cookie set
  here (one per connect, named by the state's digest; SameSite=Lax, for the vendor's cross-site
  redirect back), so a callback is finished only in the browser that began it: an authorization
  URL sent to someone else connects nothing.
- ``GET /ui/connect/callback``: the state must be the cookie's; the replica spends it, exchanges
  the code and keeps the grant.

No sign-in: the person is the app's viewer, who may have no Kubernetes identity. What binds them
is the link (minted from their verified assertion, single-use, ten minutes) and the cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re

from starlette.requests import Request
from starlette.responses import Response

from gatehouse_contract.connecting import FLOW_ID, LINK_ID, MAX_CODE_CHARS
from gatehouse_operator.connections.grants import Grants
from gatehouse_operator.web.guards import Guards, fields_of, page_refusal

log = logging.getLogger("gatehouse.operator.page")
TEMPLATE = "connect.html"
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _cookie(state: str) -> str:
    """The cookie of one connect under way: named by its state's digest, so that two begun in
    two tabs each finish."""
    return f"__Host-gatehouse-connect-{hashlib.sha256(state.encode()).hexdigest()[:16]}"


class ConnectFlow:
    def __init__(self, guards: Guards, grants: Grants) -> None:
        self.guards = guards
        self.grants = grants

    async def landing(self, request: Request) -> Response:
        async def page(request: Request) -> Response:
            return self.guards.renderer.render(TEMPLATE, visitor=None, error="", connected=None)

        return await self.guards.answer(request, page)

    async def begin(self, request: Request) -> Response:
        async def begin(request: Request) -> Response:
            flow = str((await fields_of(request)).get("flow", "")).strip()
            if not LINK_ID.match(flow):
                raise page_refusal(400, "flow: not a connect link id; open the app's link again")
            begun = await self.grants.begin(flow)
            # On to the provider by a link the person follows once they have read whose account
            # this is (a redirect of the form's post would be held to form-action 'self' too).
            response = self.guards.renderer.render(
                TEMPLATE,
                visitor=None,
                error="",
                connected=None,
                provider=begun.authorization_url,
                begun=begun,
            )
            response.headers["Cache-Control"] = "no-store"
            self.guards.sessions.start_flow(response, {"state": begun.flow}, _cookie(begun.flow))
            return response

        return await self.guards.answer(request, begin)

    async def callback(self, request: Request) -> Response:
        async def finish(request: Request) -> Response:
            query = request.query_params
            if "error" in query:
                # An OAuth error code (RFC 6749 4.1.2.1), never free text on this origin.
                said = query["error"] if _ERROR_CODE.fullmatch(query["error"]) else "an error"
                raise page_refusal(
                    403, f"the provider did not connect your account: {said}; start again"
                )
            given = query.get("state", "")
            kept = ""
            if FLOW_ID.match(given):
                kept = str(self.guards.sessions.flow(request, _cookie(given)).get("state", ""))
            if not kept or not hmac.compare_digest(kept.encode(), given.encode()):
                raise page_refusal(
                    400,
                    "this connect was not begun in this browser, or took over ten minutes: "
                    "open the app's link again",
                )
            state = kept
            code = query.get("code", "")
            if not code or len(code) > MAX_CODE_CHARS:
                raise page_refusal(400, "code: the provider sent no authorization code")
            finished = await self.grants.finish(state, code)
            response = self.guards.renderer.render(
                TEMPLATE, visitor=None, error="", connected=finished
            )
            self.guards.sessions.end_flow(response, _cookie(state))
            log.info("an account was connected to connection %s", finished.connection)
            return response

        return await self.guards.answer(request, finish)
