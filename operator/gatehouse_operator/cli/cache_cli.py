"""``gatehouse cache purge CONNECTION [-n NS]``: the connection's cached answers are never served
again. The service API sets the annotation gatehouse.dev/cache-purged-at to now, which becomes the
cache's epoch on the route (every replica stops serving the older answers once it holds it). It
decides with the caller's RBAC (update on the connection), as the page does; the server and
token are found as for ``gatehouse requests`` (``endpoints``). Exit codes: 0 purged, 2 the
command could not run (refused, no cache, no server).
"""

from __future__ import annotations

import argparse
import sys

from gatehouse_operator.cli import endpoints, kubeconfig
from gatehouse_operator.cli.service_calls import Refusal, ServiceCalls, connection_path
from gatehouse_operator.cli.service_cli import cluster_options
from gatehouse_operator.connections.models import CachePurged

DONE, NOT_RUN = 0, 2


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cache = commands.add_parser(
        "cache",
        help="purge a connection's cached answers",
        description="A connection's response cache (spec.cache).",
    )
    actions = cache.add_subparsers(dest="cache", required=True, metavar="ACTION")
    purge = actions.add_parser(
        "purge",
        parents=[cluster_options()],
        help="never serve the connection's cached answers again",
        description="Every answer the connection cached until now is never served again (the "
        "next request of each reaches the API). Needs update on the ExternalConnection.",
    )
    purge.add_argument("connection", help="the ExternalConnection's name")
    purge.add_argument("--server", help=f"the service API's URL; default: ${endpoints.API_URL}")
    purge.add_argument("--token", help=f"default: ${endpoints.TOKEN}, else the kubeconfig's")
    purge.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run(args: argparse.Namespace, prog: str) -> int:
    try:
        namespace = kubeconfig.load(args.context, args.namespace, args.kubeconfig)
        api = ServiceCalls.of(args)
        purged = api.call(
            "POST", f"{connection_path(namespace, args.connection)}/cache/purge", CachePurged
        )
    except (Refusal, kubeconfig.ClusterError) as error:
        print(f"{prog} cache purge: {error}", file=sys.stderr)
        return NOT_RUN
    if args.output == "json":
        print(purged.model_dump_json(by_alias=True))
    else:
        print(
            f"purged: answers {args.connection} cached before {purged.purged_at} are never "
            "served again"
        )
    return DONE
