"""``python -m gatehouse_dev``: the local stack's command line (what the Makefile calls)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gatehouse_dev import demo, docs, stack, typing_counts
from gatehouse_dev.binaries import BuildError, ensure_binaries, ensure_registry
from gatehouse_dev.cluster import KubectlError
from gatehouse_dev.node import cluster as node_cluster
from gatehouse_dev.otelcol import ensure_otelcol
from gatehouse_dev.processes import StartupError
from gatehouse_dev.promtool import ensure_promtool

NODE_DIR = Path(".gatehouse/node")


def build_all() -> None:
    """Every build ``make test`` needs, side by side: a cold one is mostly compiling, but each
    also waits on downloads (Go modules, the node image's Debian base) and on links, which use one
    core; run together, one's wait is another's work."""
    builds: list[Callable[[], object]] = [
        ensure_binaries,
        ensure_registry,
        ensure_promtool,
        ensure_otelcol,
        node_cluster.build,
    ]
    with ThreadPoolExecutor(max_workers=len(builds)) as builders:
        running = [builders.submit(build) for build in builds]
    for done in running:
        done.result()  # the first failure, once every build has ended


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gatehouse-dev", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build (or find cached) control-plane binaries")
    commands.add_parser(
        "build-promtool", help="build (or find cached) promtool, for the alerts' tests"
    )
    commands.add_parser(
        "build-otelcol",
        help="build (or find cached) the OpenTelemetry Collector, for the traces' tests",
    )
    commands.add_parser(
        "build-node", help="build (or find cached) the dev node's binaries and images"
    )
    commands.add_parser(
        "build-all",
        help="what make test needs, side by side: the control plane, promtool, the collector, "
        "the node's binaries and images",
    )
    commands.add_parser("up", help="start the local stack in the background")
    commands.add_parser("down", help="stop the local stack and delete its data")
    commands.add_parser("demo", help="start the stack and show it working")
    commands.add_parser("cluster-up", help="start a single-node cluster that runs Pods")
    commands.add_parser("cluster-down", help="stop the single-node cluster")
    presented = commands.add_parser(
        "cluster-webhook-client",
        help="have the node's API server present the client certificate a release's webhook "
        "made (after helm install)",
    )
    presented.add_argument("--namespace", default="gatehouse-system")
    presented.add_argument("--secret", default="gatehouse-webhook-client")
    commands.add_parser("docs", help="write the documentation site's reference pages")
    commands.add_parser(
        "typing-counts", help='count dict[str, Any] and .get("spec") in each program'
    )
    args = parser.parse_args(argv)

    paths = stack.StackPaths.for_checkout()
    try:
        if args.command == "build":
            print(ensure_binaries().directory)
        elif args.command == "build-promtool":
            print(ensure_promtool())
        elif args.command == "build-otelcol":
            print(ensure_otelcol())
        elif args.command == "build-node":
            print(*node_cluster.build()[3], sep="\n")
        elif args.command == "build-all":
            build_all()
        elif args.command == "up":
            stack.up(paths)
        elif args.command == "down":
            stack.down(paths)
        elif args.command == "cluster-up":
            node_cluster.up(NODE_DIR.resolve())
        elif args.command == "cluster-down":
            node_cluster.down(NODE_DIR.resolve())
        elif args.command == "cluster-webhook-client":
            node_cluster.present_webhook_client(NODE_DIR.resolve(), args.namespace, args.secret)
        elif args.command == "docs":
            print(*docs.write(Path.cwd()), sep="\n")
        elif args.command == "typing-counts":
            return typing_counts.main(Path.cwd())
        else:
            demo.run(paths)
    except (BuildError, StartupError, KubectlError, TimeoutError) as error:
        print(f"gatehouse: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
