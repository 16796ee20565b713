"""``gatehouse open``: the page in the browser, signed in as whoever the kubeconfig says.

Whatever the kubeconfig authenticates with (a client certificate, a token, an exec or OIDC
plugin), the kubernetes client's own loading uses it: the command asks the API server who it is
(a SelfSubjectReview), makes an X25519 key pair, and creates a SignInRequest stating that
identity and the public key. The admission webhook refuses it unless the identity is the
creator's own; the operator answers with a one-time code sealed to the key, which this command
alone opens, and the browser opens the page's link with the code in the fragment (never sent to
a server, so no log keeps it). The private key lives only in this process.
"""

from __future__ import annotations

import argparse
import sys
import time
import webbrowser
from urllib.parse import quote

from pydantic import JsonValue

from gatehouse_operator.api.meta import GROUP, VERSION
from gatehouse_operator.api.sign_in_request import (
    CODE_SECONDS,
    SIGN_IN_REQUEST,
    Requester,
    SignInRequestStatus,
    StoredSignInRequest,
)
from gatehouse_operator.cli import endpoints, kubeconfig
from gatehouse_operator.cli.service_cli import cluster_options
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.keys import sign_in_codes
from gatehouse_operator.kube.errors import ApiError, NotFound

OPENED, NOT_OPENED = 0, 2
LINK_PATH = "/ui/sign-in/link"


class NotOpened(GatehouseError):
    """Why the page could not be opened, in one line."""


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    opened = commands.add_parser(
        "open",
        parents=[cluster_options()],
        help="open the Gatehouse page, signed in as your kubeconfig's user",
        description="Asks the operator for a one-time code (a SignInRequest in the namespace) "
        "and opens the page with it: signed in as the user your kubeconfig authenticates as, "
        f"with no token to paste. The link works once, within {CODE_SECONDS} seconds.",
    )
    opened.add_argument(
        "--server",
        help=(
            f"the page's URL; default: ${endpoints.API_URL} (or $GATEHOUSE_SERVER), else the "
            "one the installation names"
        ),
    )
    opened.add_argument(
        "--no-browser", action="store_true", help="print the link instead of opening it"
    )
    opened.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for the operator's answer"
    )


def page_link(server: str, code: str) -> str:
    """The link that signs in: the page's sign-in link, the code in the fragment."""
    base = server.strip().rstrip("/").removesuffix("/ui")
    return f"{base}{LINK_PATH}#code={quote(code, safe=':')}"


def _requester() -> Requester:
    info = kubeconfig.who_am_i()
    return Requester.model_validate({key: value for key, value in info.items() if value})


def _create(api: kubeconfig.CustomObjects, namespace: str, body: dict[str, JsonValue]) -> str:
    try:
        created = api.create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            SIGN_IN_REQUEST.plural,
            body,
            _request_timeout=kubeconfig.REQUEST_TIMEOUT,
        )
    except NotFound:
        raise NotOpened(
            f"this cluster has no {SIGN_IN_REQUEST.kind} kind: is Gatehouse (with its CRDs) "
            "installed, and at this version?"
        ) from None
    except ApiError as error:
        if error.status == 403 and "admission webhook" not in (error.body or ""):
            raise NotOpened(
                f"you may not create {SIGN_IN_REQUEST.plural} in namespace {namespace} (RBAC): "
                "a Gatehouse role there grants it (gatehouse-admin, gatehouse-builder or "
                "gatehouse-interactive-viewer); or pick a namespace where you hold one with -n"
            ) from None
        raise NotOpened(kubeconfig.refusal(error)) from None
    return StoredSignInRequest.model_validate(created).metadata.name


def _answer(
    api: kubeconfig.CustomObjects, namespace: str, name: str, timeout: float
) -> tuple[SignInRequestStatus, str]:
    """The operator's answer (the status with the code) and the request's uid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = StoredSignInRequest.model_validate(
            api.get_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                SIGN_IN_REQUEST.plural,
                name,
                _request_timeout=kubeconfig.REQUEST_TIMEOUT,
            )
        )
        if found.status.sealed_code:
            return found.status, found.metadata.uid
        time.sleep(0.3)
    raise NotOpened(
        f"the Gatehouse operator did not answer SignInRequest {namespace}/{name} within "
        f"{timeout:g} s: is it running, and does it watch namespace {namespace}?"
    )


def open_page(args: argparse.Namespace) -> str:
    """The link that signs in (opened in the browser unless --no-browser)."""
    namespace = kubeconfig.load(args.context, args.namespace, args.kubeconfig)
    api = kubeconfig.custom_objects()
    private, public = sign_in_codes.new_key()
    with kubeconfig.reaching_the_cluster():
        try:
            requester = _requester()
        except NotFound:
            raise NotOpened(
                "the API server does not answer SelfSubjectReview (`kubectl auth whoami`): "
                "Kubernetes 1.28 or newer is needed"
            ) from None
        body: dict[str, JsonValue] = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": SIGN_IN_REQUEST.kind,
            "metadata": {"generateName": "gatehouse-open-"},
            "spec": {
                "publicKey": public,
                "requester": requester.model_dump(by_alias=True, mode="json"),
            },
        }
        name = _create(api, namespace, body)
        status, uid = _answer(api, namespace, name, args.timeout)
    # The page and the service API are one server: the same names find both.
    server = endpoints.api_url(args.server) or status.page_url
    if not server:
        raise NotOpened(
            "no page URL: give --server URL (the Gatehouse page's address), set "
            f"${endpoints.API_URL}, or have the installation name it (the chart's "
            "operator.page.url)"
        )
    code = sign_in_codes.open_code(private, status.sealed_code, namespace, name, uid)
    return page_link(server, code)


def run(args: argparse.Namespace, prog: str) -> int:
    try:
        link = open_page(args)
    except (NotOpened, kubeconfig.ClusterError, sign_in_codes.CodeUnreadable) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return NOT_OPENED
    except ApiError as error:
        print(f"{prog}: {kubeconfig.refusal(error)}", file=sys.stderr)
        return NOT_OPENED
    if not args.no_browser and webbrowser.open(link):
        print(
            f"opened the Gatehouse page in your browser (the link works once, within "
            f"{CODE_SECONDS} s)"
        )
    else:
        print(f"open this link within {CODE_SECONDS} s (it works once):")
        print(link)
    return OPENED
