"""``gatehouse requests``: an app's or a connection's recent fetches, from the service API.

    gatehouse requests CONNECTION [-n NS] [-f] [--limit N] [-o text|json]
    gatehouse requests --app DataApp/NAME [-n NS] [-f]

It asks the operator's service API (``--server``, else $GATEHOUSE_API_URL, which ``make up``'s env
file sets; $GATEHOUSE_SERVER is read too), with ``--token``, else $GATEHOUSE_TOKEN, else the
kubeconfig's bearer token (``endpoints``): the API decides with the caller's RBAC, as for the
page. ``-f`` follows, like ``kubectl logs -f``: after the newest ``--limit``, it asks every
``--interval`` seconds for what ended since, with the cursor the last answer gave, so that no
request is printed twice or left out however many end between two asks (``--limit`` bounds the
first page only); when more ended than the replicas keep (200 per connection and per app), it
says how many it could not print. Exit codes: 0 done, 2 the command could not run (refused, no
server, bad arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

from gatehouse_contract.activity import MAX_RECENT
from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.cli import endpoints, kubeconfig
from gatehouse_operator.cli.service_calls import Refusal, ServiceCalls, connection_path
from gatehouse_operator.cli.service_cli import cluster_options
from gatehouse_operator.connections.models import (
    HiddenRequestView,
    RecentRequests,
    RecentRequestView,
)

DONE, NOT_RUN = 0, 2
APP_KINDS = {kind.kind: kind.plural for kind in (DATA_APP, CHART_TYPE)}


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    shown = commands.add_parser(
        "requests",
        parents=[cluster_options()],
        help="show the recent requests of a connection or an app",
        description="The fetches apps made through the proxy, newest last: time, app, "
        "connection, method, path (query values replaced by *), status, the proxy's code, "
        "duration, bytes, replica; through a connection you may not see, only time, app, "
        "connection, status, code and replica. Never a header value or a body.",
    )
    shown.add_argument("connection", nargs="?", help="the ExternalConnection's name")
    shown.add_argument("--app", help="an app instead, as DataApp/NAME or ChartType/NAME")
    shown.add_argument("-f", "--follow", action="store_true", help="keep printing new ones")
    shown.add_argument(
        "--limit",
        type=int,
        default=100,
        help=f"how many to start with (1-{MAX_RECENT}); -f then prints every new one",
    )
    shown.add_argument("--interval", type=float, default=1.0, help="seconds between asks (-f)")
    shown.add_argument("--server", help=f"the service API's URL; default: ${endpoints.API_URL}")
    shown.add_argument("--token", help=f"default: ${endpoints.TOKEN}, else the kubeconfig's")
    shown.add_argument("-o", "--output", choices=("text", "json"), default="text")


def _path(args: argparse.Namespace, namespace: str) -> str:
    base = f"/api/v1/namespaces/{quote(namespace, safe='')}"
    if args.app:
        kind, _, name = args.app.partition("/")
        if kind not in APP_KINDS or not name:
            raise Refusal("--app: give DataApp/NAME or ChartType/NAME")
        return f"{base}/{APP_KINDS[kind]}/{quote(name, safe='')}/requests"
    if not args.connection:
        raise Refusal("give a connection's name, or --app KIND/NAME")
    return f"{connection_path(namespace, args.connection)}/requests"


def line(item: RecentRequestView | HiddenRequestView) -> str:
    """One request as a line of text; one through a connection the caller may not see, as the
    service API shows it (no method, path, duration or sizes)."""
    when = datetime.fromtimestamp(item.time, UTC).strftime("%H:%M:%S.%f")[:-3]
    if isinstance(item, HiddenRequestView):
        return (
            f"{when} {item.app} -> {item.connection} (details hidden) "
            f"{item.status} {item.code} {item.replica}"
        )
    return (
        f"{when} {item.app}{f' for {item.viewer}' if item.viewer else ''} -> "
        f"{item.connection or '-'} {item.method} {item.path} "
        f"{item.status} {item.code} {item.duration_ms:.1f}ms "
        f"in={item.request_bytes} out={item.response_bytes}"
        f"{f' cache={item.cache}' if item.cache else ''} {item.replica}"
    )


def as_json(item: RecentRequestView | HiddenRequestView) -> str:
    """One request as the service API sent it: its fields, in its order."""
    return json.dumps(item.model_dump(by_alias=True, mode="json"))


class Asker:
    def __init__(self, calls: ServiceCalls, path: str) -> None:
        self.calls = calls
        self.path = path

    def ask(self, limit: int, after: str = "") -> RecentRequests:
        query = urlencode({"limit": limit, **({"after": after} if after else {})})
        return self.calls.call("GET", f"{self.path}?{query}", RecentRequests)


def run(args: argparse.Namespace, prog: str) -> int:
    try:
        namespace = kubeconfig.load(args.context, args.namespace, args.kubeconfig)
        calls = ServiceCalls.of(args)
        if not 1 <= args.limit <= MAX_RECENT:
            raise Refusal(f"--limit: 1 to {MAX_RECENT}")
        asker = Asker(calls, _path(args, namespace))
        found = asker.ask(args.limit)
        told = ""
        while True:
            if found.hidden_reason and found.hidden_reason != told:
                told = found.hidden_reason
                print(f"{prog} requests: details hidden: {told}", file=sys.stderr, flush=True)
            if found.lost:
                print(
                    f"{prog} requests: {found.lost} not shown: they ended since the last ask, "
                    "and the proxy replicas keep only their last 200 per connection and per "
                    "app; a shorter --interval keeps up",
                    file=sys.stderr,
                    flush=True,
                )
            for item in reversed(found.items):  # oldest first, as logs print
                print(as_json(item) if args.output == "json" else line(item), flush=True)
            if not args.follow:
                return DONE
            time.sleep(args.interval)
            # Every request that ended since the last answer, each once: the cursor holds where
            # each replica's records were left.
            found = asker.ask(MAX_RECENT, found.cursor)
    except (Refusal, kubeconfig.ClusterError) as error:
        print(f"{prog} requests: {error}", file=sys.stderr)
        return NOT_RUN
    except KeyboardInterrupt:
        return DONE
