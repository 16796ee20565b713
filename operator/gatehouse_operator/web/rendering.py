"""How the page looks and what every answer carries: templates, instructions as markdown, the
refusal page, and the security headers on every response (the stylesheet's too)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.datastructures import MutableHeaders
from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gatehouse_contract.header_names import VIEWER_IDENTITY_DISCLOSED
from gatehouse_contract.routes import role_session_name
from gatehouse_operator.api.auth_kinds import FORM_SECTIONS, secrets_shown

# The page works with forms alone; its one script (static/page.js, from this origin, never
# inline) only shows sooner what a form would: a status as it settles, the chosen auth kind's
# fields, tabs, requests as they come. No inline script, no eval; what it fetches, from this
# origin only. Styles and images from this origin only.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
# Raw HTML off: markup in instructions is shown as text. Links keep markdown-it's own check,
# which drops javascript:, vbscript:, file: and data: URLs.
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")


def markdown(text: str) -> Markup:
    return Markup(_MARKDOWN.render(text))  # noqa: S704 (escaped by markdown-it: html is off)


def size(count: int) -> str:
    """A number of bytes in binary units, as a person reads it: 1 MiB, 64 KiB, 1.5 KiB."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= factor:
            return f"{count / factor:,.1f}".removesuffix(".0") + f" {unit}"
    return f"{count:,} bytes"


def duration(seconds: int) -> str:
    """A number of seconds as a person reads it, in its two largest units: 45 s, 1 min,
    1 h 30 min, 7 days."""
    parts = []
    for unit, factor in (("day", 86_400), ("h", 3_600), ("min", 60), ("s", 1)):
        count, seconds = divmod(seconds, factor)
        if count:
            parts.append(f"{count:,} {unit}{'s' if unit == 'day' and count != 1 else ''}")
    return " ".join(parts[:2]) or "0 s"


def limit(value: object, key: str) -> str:
    """A limit's value in its unit, by its key's (``maxResponseBytes``, ``timeoutSeconds``);
    a count as a number."""
    if not isinstance(value, int) or isinstance(value, bool):
        return str(value)
    if key.endswith("Bytes"):
        return size(value)
    if key.endswith("Seconds"):
        return f"{value:,} s"
    return f"{value:,}"


def templates() -> Environment:
    env = Environment(
        loader=PackageLoader("gatehouse_operator.web", "templates"),
        autoescape=select_autoescape(default=True),
    )
    # The wizard's form section of each auth kind that has one (templates/auth/), and what the
    # secret may be, in words.
    env.globals["auth_form_sections"] = FORM_SECTIONS
    env.globals["viewer_identity_disclosed"] = VIEWER_IDENTITY_DISCLOSED
    env.globals["auth_secrets_shown"] = Markup(secrets_shown())  # noqa: S704 (the registry's own words, no input)
    # What a role's session is called (AWS's records, the role's trust policy): the proxy's rule.
    env.globals["role_session_name"] = role_session_name
    env.filters["markdown"] = markdown
    env.filters["size"] = size
    env.filters["limit"] = limit
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)
    env.filters["clock"] = lambda seconds: datetime.fromtimestamp(seconds, UTC).strftime(
        "%Y-%m-%d %H:%M:%S.%f"
    )[:-3]
    return env


class Renderer:
    def __init__(self, read_only: bool) -> None:
        self.read_only = read_only
        self.env = templates()

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(read_only=self.read_only, **context)
        return HTMLResponse(html, status_code=status)

    def refused(self, status: int, message: str) -> HTMLResponse:
        return self.render("refused.html", status, visitor=None, message=message)


class SecurityHeaders:
    """Adds the page's security headers to every response, the stylesheet's too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    # A page that needs more (the sign-in link's script) sets its own policy.
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, with_headers)
