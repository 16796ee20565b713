"""``python -m gatehouse_operator``: run the operator (kopf) with Gatehouse's handlers."""

from __future__ import annotations

import argparse
import logging
import sys

import kopf

import gatehouse_operator.controllers  # noqa: F401  (registers the handlers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gatehouse-operator", description=__doc__)
    parser.add_argument(
        "--namespace", action="append", default=[], help="watch only these (default: all)"
    )
    parser.add_argument("--liveness", default="http://0.0.0.0:8080/healthz")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    kopf.run(
        standalone=True,  # one replica (Recreate): the routing tables have a single source
        clusterwide=not args.namespace,
        namespaces=args.namespace,
        liveness_endpoint=args.liveness,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
