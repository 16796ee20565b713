"""Signing in with a one-time code from ``gatehouse open``: the link's page, and the exchange.

The command opens ``/ui/sign-in/link#code=...``. The code travels in the fragment, which a browser
never sends to a server, so no access log, proxy or Referer keeps it; the link's page (its one
script, from this origin) takes it out of the address bar and posts it, same-origin, to
``/ui/sign-in/code``. Without script the page shows the form to paste the code into.

The exchange reads the SignInRequest the code names, checks the code against its digest and its
expiry (keys.sign_in_codes), deletes the request as read (only one exchange can), and starts a
session that impersonates the requester the admission webhook recorded. What that session may do
is what RBAC lets the requester do: a code grants nothing more.
"""

from __future__ import annotations

import datetime
import logging

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from gatehouse_operator.access.reviews import UserInfo
from gatehouse_operator.api.sign_in_request import SIGN_IN_REQUEST, StoredSignInRequest
from gatehouse_operator.keys import sign_in_codes
from gatehouse_operator.kube.resources import Resources
from gatehouse_operator.web.guards import Guards, fields_of

log = logging.getLogger("gatehouse.operator.page")
TEMPLATE = "sign_in_link.html"
NO_STORE = {"Cache-Control": "no-store"}


class CodeSignIn:
    def __init__(self, guards: Guards, resources: Resources) -> None:
        self.guards = guards
        self.resources = resources

    async def link(self, request: Request) -> Response:
        async def page(request: Request) -> Response:
            return self.guards.renderer.render(
                TEMPLATE, visitor=None, error="", code="", requester=""
            )

        return await self.guards.answer(request, page)

    async def exchange(self, request: Request) -> Response:
        return await self.guards.answer(request, self._exchange)

    def _refused(self, message: str) -> Response:
        return self.guards.renderer.render(
            TEMPLATE, 401, visitor=None, error=message, code="", requester=""
        )

    async def _exchange(self, request: Request) -> Response:
        fields = await fields_of(request)
        code = str(fields.get("code", ""))
        parts = sign_in_codes.parse(code)
        if parts is None:
            return self._refused("code: not a sign-in code; run `gatehouse open` for a link")
        found = await self.resources.get_custom(SIGN_IN_REQUEST, parts.namespace, parts.name)
        if found is None:
            return self._refused(sign_in_codes.USED_OR_UNKNOWN)
        try:
            stored = StoredSignInRequest.model_validate(found)
            requester = sign_in_codes.requester_of(
                parts, stored.spec, stored.status, datetime.datetime.now(datetime.UTC)
            )
        except ValidationError:
            return self._refused(sign_in_codes.NOT_THIS)
        except sign_in_codes.Refusal as refusal:
            return self._refused(str(refusal))
        if fields.get("confirm") != "yes":
            # A link another person made signs in as them (login CSRF): the page names whose it
            # is and waits for a click before the code is spent (the link page's script asks
            # for the name alone).
            if fields.get("preview") == "json":
                return JSONResponse({"requester": requester.username}, headers=NO_STORE)
            return self.guards.renderer.render(
                TEMPLATE, visitor=None, error="", code=code, requester=requester.username
            )
        # Used once: of two exchanges of one code, only one deletes the request it read.
        if not await self.resources.delete_as_read(SIGN_IN_REQUEST, found):
            return self._refused(sign_in_codes.USED_OR_UNKNOWN)
        response = RedirectResponse("/ui/", status_code=303)
        user = UserInfo(
            username=requester.username,
            uid=requester.uid,
            groups=requester.groups,
            extra=requester.extra,
        )
        if not self.guards.sessions.start_as(response, user):
            return self._refused(
                f"{requester.username} belongs to too many groups to keep in a session cookie; "
                "sign in through your identity proxy"
            )
        log.info(
            "%s signed in with a one-time code (SignInRequest %s/%s)",
            requester.username,
            parts.namespace,
            parts.name,
        )
        return response
