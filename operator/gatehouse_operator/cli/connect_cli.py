"""``gatehouse connect``: connects the shared account of an ``oauth2AuthorizationCode`` connection
(``credentialScope: shared``), or shows and revokes a connection's connected accounts.

    gatehouse connect CONNECTION [-n NS]              a link to connect the shared account
    gatehouse connect CONNECTION --show [-o json]     who connected, the last refresh, failures
    gatehouse connect CONNECTION --revoke [OWNER]     revoke one account (its digest) or all

The link is the page's (single-use, ten minutes): open it in a browser, sign in at the provider
as the account every viewer will use, and consent. The service API decides with the caller's
RBAC (update on the connection), as the page does; the server and token are found as for
``gatehouse requests`` (``endpoints``). Exit codes: 0 done, 2 the command could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from urllib.parse import urlencode

from gatehouse_contract.connecting import GrantsSummary
from gatehouse_operator.cli import endpoints, kubeconfig
from gatehouse_operator.cli.service_calls import Refusal, ServiceCalls, connection_path
from gatehouse_operator.cli.service_cli import cluster_options
from gatehouse_operator.service_api.models import ConnectLink, Revoked

DONE, NOT_RUN = 0, 2


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    connect = commands.add_parser(
        "connect",
        parents=[cluster_options()],
        help="connect a connection's shared account, or show and revoke connected accounts",
        description="For an oauth2AuthorizationCode connection: a single-use link (ten "
        "minutes) to connect its shared account in a browser; --show lists its connected "
        "accounts, --revoke drops them (revoked at the provider where the connection names a "
        "revocation URL). Needs update on the ExternalConnection.",
    )
    connect.add_argument("connection", help="the ExternalConnection's name")
    what = connect.add_mutually_exclusive_group()
    what.add_argument("--show", action="store_true", help="list the connected accounts")
    what.add_argument(
        "--revoke",
        nargs="?",
        const="",
        metavar="OWNER",
        help="revoke one account (its digest, as --show lists it) or, without OWNER, all",
    )
    connect.add_argument("--server", help=f"the service API's URL; default: ${endpoints.API_URL}")
    connect.add_argument("--token", help=f"default: ${endpoints.TOKEN}, else the kubeconfig's")
    connect.add_argument("-o", "--output", choices=("text", "json"), default="text")


def _when(seconds: float) -> str:
    if not seconds:
        return "never"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def shown(summary: GrantsSummary) -> str:
    lines = [
        f"{summary.connected} connected · last refresh {_when(summary.refreshed_at)} · "
        f"{summary.failures} failed refreshes"
        + (f" (the last: {summary.last_failure})" if summary.last_failure else "")
    ]
    lines += [
        f"{grant.owner}  {grant.label or '-'}  connected {_when(grant.connected_at)}  "
        f"refreshed {_when(grant.refreshed_at)}"
        for grant in summary.listed
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace, prog: str) -> int:
    try:
        namespace = kubeconfig.load(args.context, args.namespace, args.kubeconfig)
        api = ServiceCalls.of(args)
        base = connection_path(namespace, args.connection)
        if args.show:
            summary = api.call("GET", f"{base}/grants", GrantsSummary)
            print(summary.model_dump_json() if args.output == "json" else shown(summary))
        elif args.revoke is not None:
            query = f"?{urlencode({'owner': args.revoke})}" if args.revoke else ""
            revoked = api.call("DELETE", f"{base}/grants{query}", Revoked)
            print(
                json.dumps({"revoked": revoked.revoked})
                if args.output == "json"
                else f"revoked {revoked.revoked} connected account(s)"
            )
        else:
            link = api.call("POST", f"{base}/connect", ConnectLink)
            if args.output == "json":
                print(link.model_dump_json(by_alias=True))
            else:
                print(link.connect_url)
                print(
                    f"Open it within {link.expires_in_seconds // 60} minutes, sign in at the "
                    "provider as the account every viewer will use, and consent. It works once.",
                    file=sys.stderr,
                )
        return DONE
    except (Refusal, kubeconfig.ClusterError) as error:
        print(f"{prog} connect: {error}", file=sys.stderr)
        return NOT_RUN
