"""What every request to the page passes before a handler runs: a name check on the path, the
same origin for a form, a signed-in visitor, the visitor's CSRF token, read-only mode; and what
any failure becomes: a page that says why, never a traceback."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gatehouse_contract.keyring import KeyringError
from gatehouse_contract.numerals import whole_number
from gatehouse_operator.access.reviews import Access, User
from gatehouse_operator.connections import errors
from gatehouse_operator.connections.errors import check_names
from gatehouse_operator.kube.errors import ApiError
from gatehouse_operator.web.rendering import Renderer
from gatehouse_operator.web.session import Credentials, Sessions, same_origin

log = logging.getLogger("gatehouse.operator.page")
CROSS_SITE = "refused: the form was sent by another site"
READ_ONLY = "this page is read-only: connections and apps are managed in Git here"


@dataclass(frozen=True)
class Visitor:
    user: User
    credentials: Credentials
    csrf: str


def page_refusal(status: int, message: str) -> errors.Refused:
    """A form the page will not act on; the message is shown to the visitor (the page shows no
    code, which only the service API's answers carry)."""
    return errors.Refused(status, "refused", message)


Handler = Callable[[Request, Visitor], Awaitable[Response]]
# The page's forms are small; a bound taken from Content-Length before anything is read keeps an
# unauthenticated sign-in post from filling the operator's memory.
MAX_FORM_BYTES = 64 * 1024


async def fields_of(
    request: Request, max_bytes: int = MAX_FORM_BYTES, max_fields: int = 16
) -> FormData:
    length = whole_number(request.headers.get("content-length", ""))
    if length is None or length > max_bytes:
        raise page_refusal(413, f"a form of at most {max_bytes // 1024} KiB, with its length sent")
    try:
        return await request.form(max_files=0, max_fields=max_fields, max_part_size=max_bytes)
    except HTTPException as error:
        raise page_refusal(400, f"the form could not be read: {error.detail}") from None


class Guards:
    def __init__(
        self, access: Access, sessions: Sessions, renderer: Renderer, read_only: bool
    ) -> None:
        self.access = access
        self.sessions = sessions
        self.renderer = renderer
        self.read_only = read_only

    async def visitor(self, request: Request) -> Visitor | None:
        credentials = self.sessions.credentials(request)
        if credentials is None:
            return None
        # A code's session: the requester the API server authenticated when they asked for it.
        user = credentials.impersonated or await self.access.authenticate(credentials.token)
        if user is None:
            return None
        return Visitor(user, credentials, self.sessions.csrf_token(credentials))

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """A GET: signed-out visitors are sent to sign in and see nothing else."""

        async def handle(request: Request) -> Response:
            async def signed_in(request: Request) -> Response:
                visitor = await self.visitor(request)
                if visitor is None:
                    return RedirectResponse("/ui/sign-in", status_code=303)
                return await handler(request, visitor)

            return await self.answer(request, signed_in)

        return handle

    def form(
        self,
        handler: Handler,
        *,
        writes_resources: bool = False,
        max_bytes: int = MAX_FORM_BYTES,
        max_fields: int = 16,
    ) -> Callable[[Request], Awaitable[Response]]:
        """A POST: refused unless same-origin, signed in, with the visitor's CSRF token. The
        form is read once, within its bounds; the handler's fields_of gets the same."""

        async def handle(request: Request) -> Response:
            async def checked(request: Request) -> Response:
                fields = await fields_of(request, max_bytes, max_fields)
                visitor = await self.visitor(request)
                if visitor is None:
                    raise page_refusal(401, "sign in first")
                if not self.sessions.csrf_valid(visitor.credentials, str(fields.get("csrf", ""))):
                    raise page_refusal(403, "the form has expired: reload the page and try again")
                if writes_resources and self.read_only:
                    raise page_refusal(403, READ_ONLY)
                return await handler(request, visitor)

            return await self.answer(request, checked)

        return handle

    async def answer(
        self, request: Request, handler: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        """The handler's page, or a page that says why not: never a traceback."""
        try:
            check_names(request.path_params)
            if request.method == "POST" and not same_origin(request):
                raise page_refusal(403, CROSS_SITE)
            return await handler(request)
        except errors.Refused as error:
            return self.renderer.refused(error.status, error.message)
        except ApiError as error:
            # The API server's own words may quote the request; only refusals of the visitor's
            # own changes are shown (see link), others by status alone.
            return self.renderer.refused(502, f"the Kubernetes API answered {error.status}")
        except (aiohttp.ClientError, TimeoutError, OSError, KeyringError) as error:
            log.warning("connections page: %s on %s", type(error).__name__, request.url.path)
            return self.renderer.refused(
                503, "the page cannot reach the Kubernetes API now: try again"
            )
