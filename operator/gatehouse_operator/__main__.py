"""``python -m gatehouse_operator``: run the operator (kopf) with Gatehouse's handlers."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from dataclasses import replace
from typing import TypedDict

import kopf

import gatehouse_operator.controllers
import gatehouse_operator.wiring.controller
import gatehouse_operator.wiring.webhook  # noqa: F401  (the webhook's, on its registry)
from gatehouse_contract.keyring import KeyringFile
from gatehouse_contract.observability import JSONFormatter, version
from gatehouse_operator.controllers import admission
from gatehouse_operator.leadership import elected
from gatehouse_operator.settings import OperatorSettings, WebhookSettings

LOG_FORMATS = ("text", "json")


class KopfOptions(TypedDict):
    """What kopf is run with, led by a Lease or not."""

    standalone: bool
    clusterwide: bool
    namespaces: list[str]
    memo: kopf.Memo


def identity() -> str:
    """Who this operator is in kopf's peering records: the Pod's name, else host and process.

    kopf's own default asks ``getpass`` for the user name, which fails in the image: its user
    (65532) has no passwd entry.
    """
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gatehouse-operator", description=__doc__)
    parser.add_argument(
        "--role",
        choices=("controller", "webhook"),
        default="controller",
        help="controller: reconciles, serves the table channel, the service API and the page; "
        "webhook: the admission webhook alone (any number of replicas)",
    )
    parser.add_argument(
        "--namespace", action="append", default=[], help="watch only these (default: all)"
    )
    parser.add_argument("--liveness", default="http://0.0.0.0:8080/healthz")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text")
    args = parser.parse_args(argv)
    kopf.configure(verbose=args.verbose, log_format=kopf.LogFormat.FULL)
    if args.log_format == "json":
        # The proxy's JSON schema, not kopf's own (its fields and level names differ): one log
        # pipeline reads both programs. The object a line is about stays, under "object".
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JSONFormatter())
    # Checked before kopf starts: a bad setting is one line and exit 2 (a crash loop that says
    # why), where kopf would retry its start-up handler every minute with a traceback.
    try:
        options: OperatorSettings | WebhookSettings
        if args.role == "webhook":
            options = WebhookSettings.from_env()
        else:
            options = replace(OperatorSettings.from_env(), namespaces=tuple(args.namespace))
            if options.keyring_file:
                KeyringFile(options.keyring_file).check()
    except ValueError as error:
        print(f"gatehouse-operator: {error}", file=sys.stderr)
        return 2
    logging.getLogger("gatehouse.operator").info("gatehouse-operator %s (%s)", version(), args.role)
    # Peering is not leader election (two replicas of the same priority both freeze): the
    # controller elects its leader with a Lease (see leadership), and the webhook needs none.
    common: KopfOptions = {
        "standalone": True,
        "clusterwide": not args.namespace,
        "namespaces": args.namespace,
        "memo": kopf.Memo(options=options),
    }
    if isinstance(options, OperatorSettings) and options.leader_lease:
        return asyncio.run(elected.run(options.leader_lease, args.liveness, identity(), **common))
    kopf.run(
        registry=admission.REGISTRY if args.role == "webhook" else kopf.get_default_registry(),
        # kopf's Identity is a NewType of str that kopf does not export.
        identity=identity(),  # type: ignore[arg-type]
        liveness_endpoint=args.liveness,
        **common,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
