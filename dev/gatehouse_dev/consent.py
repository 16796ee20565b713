"""Plays a person's browser through the connect flow, against the operator's page and the dev
authorization server (``gatehouse_dev.authorization_code``): the link's page, its "Continue"
(the link's id posted from the page's own origin), the provider's consent answered at once
(scripted: ``consent=approve&user=...``), and the callback with the cookie the page set.

    python -m gatehouse_dev.consent LINK [--user NAME] [--deny]

For the local stack and the tests: a real provider's consent is a person's, in a real browser.
httpx keeps no ``Secure`` cookie over http://127.0.0.1, so the cookie is carried by hand.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from urllib.parse import urlsplit

import httpx

from gatehouse_contract.connecting import CALLBACK_PATH, CONNECT_PATH

_PROVIDER_LINK = re.compile(r'<a href="([^"]+)" id="provider"')
_MESSAGE = re.compile(r'<p class="error" role="alert"[^>]*>([^<]*)</p>')


class ConsentFailed(Exception):
    """A step answered what a browser would show as a refusal; the page's words say why."""


class Browser:
    """One browser (one cookie) on the page at ``page``."""

    def __init__(self, page: str) -> None:
        self.page = page.rstrip("/")
        self.cookie = ""

    def begin(self, link: str) -> httpx.Response:
        """The click on the link's page: the link's id posted from the page's own origin; on
        success the page (200) that sends the browser on to the provider."""
        landing = httpx.get(link.partition("#")[0], timeout=10)
        landing.raise_for_status()
        begun = httpx.post(
            f"{self.page}{CONNECT_PATH}",
            data={"flow": link.partition("#")[2]},
            headers={"Origin": self.page},
            timeout=30,
        )
        if begun.status_code == 200 and "set-cookie" in begun.headers:
            self.cookie = begun.headers["set-cookie"].partition(";")[0]
        return begun

    @staticmethod
    def provider(begun: httpx.Response) -> str:
        """Where the begun page sends the browser on: the provider's authorization URL."""
        found = _PROVIDER_LINK.search(begun.text)
        if found is None:
            raise ConsentFailed(said(begun))
        return html.unescape(found.group(1))

    def consent(self, authorization_url: str, user: str, decision: str = "approve") -> str:
        """The person signs in at the provider as ``user`` and decides: the callback's URL."""
        back = httpx.get(f"{authorization_url}&consent={decision}&user={user}", timeout=10)
        location = str(back.headers.get("location", ""))
        if back.status_code not in (302, 303) or urlsplit(location).path != CALLBACK_PATH:
            raise ConsentFailed(f"the provider answered {back.status_code}: {back.text[:200]}")
        return location

    def callback(self, url: str) -> httpx.Response:
        return httpx.get(url, headers={"Cookie": self.cookie} if self.cookie else {}, timeout=30)

    def connect(self, link: str, user: str, decision: str = "approve") -> httpx.Response:
        """The whole flow, from the link to the callback's page."""
        begun = self.begin(link)
        return self.callback(self.consent(self.provider(begun), user, decision))


def said(page: httpx.Response) -> str:
    """What a page of the connect flow says went wrong (its status, when it says nothing)."""
    found = _MESSAGE.search(page.text)
    return html.unescape(found.group(1)) if found else f"HTTP {page.status_code}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gatehouse_dev.consent", description=__doc__)
    parser.add_argument("link", help="the connect link (a 401's connectUrl, gatehouse connect's)")
    parser.add_argument("--user", default="viewer", help="who signs in at the dev provider")
    parser.add_argument("--deny", action="store_true", help="refuse instead of consenting")
    args = parser.parse_args(argv)
    page = args.link.partition(CONNECT_PATH)[0]
    try:
        done = Browser(page).connect(args.link, args.user, "deny" if args.deny else "approve")
    except (ConsentFailed, httpx.HTTPError) as error:
        print(f"not connected: {error}", file=sys.stderr)
        return 1
    if done.status_code != 200:
        print(f"not connected: {said(done)}", file=sys.stderr)
        return 1
    found = re.search(r'<p id="connected">(.*?)</p>', done.text, re.S)
    words = " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split()) if found else ""
    print(words or "Connected.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
