"""``gatehouse``: test a connection from the command line, without writing YAML.

``gatehouse test CONNECTION [-n NAMESPACE] [--context CONTEXT] [-X METHOD] [--path PATH]
[--data JSON] [--save-sample LABEL]`` creates a ConnectionTest with the caller's own kubeconfig
(so RBAC decides, as with kubectl), waits for it to finish and prints the outcome.
``gatehouse save-sample TEST --label LABEL`` keeps a finished, passing test as a sample, once its
result was seen. Exit codes: 0 passed (saved), 1 the test ran and failed (was not saved), 2 the
command could not be run (bad arguments, no cluster, refused, timed out).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, cast

from kubernetes import client

from gatehouse_operator import kubeconfig
from gatehouse_operator.api.connection_test import (
    CONNECTION_TEST,
    SAMPLE_LABEL_CHARS,
    SAVE_AS_SAMPLE_ANNOTATION,
)
from gatehouse_operator.api.meta import GROUP, VERSION
from gatehouse_operator.connections import runs
from gatehouse_operator.connections.models import ConnectionTestOutcome

PASSED, FAILED, NOT_RUN = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gatehouse", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    test = commands.add_parser("test", help="test an ExternalConnection through the proxy")
    test.add_argument("connection", help="the ExternalConnection's name")
    test.add_argument("-n", "--namespace", help="default: the context's namespace")
    test.add_argument("--context", help="the kubeconfig context to use")
    test.add_argument("-X", "--method", default="GET", type=str.upper)
    test.add_argument("--path", default="/", help="relative to the base URL, may hold a query")
    test.add_argument("--data", help="a JSON request body (not with GET)")
    test.add_argument("--save-sample", metavar="LABEL", help="keep a passing answer as a sample")
    test.add_argument("--timeout", type=float, default=150.0, help="seconds to wait")
    test.add_argument("-o", "--output", choices=["text", "json"], default="text")
    save = commands.add_parser(
        "save-sample", help="keep a finished, passing ConnectionTest as a sample"
    )
    save.add_argument("test", help="the ConnectionTest's name (printed by `gatehouse test`)")
    save.add_argument("--label", required=True, help=f"1 to {SAMPLE_LABEL_CHARS} characters")
    save.add_argument("-n", "--namespace", help="default: the context's namespace")
    save.add_argument("--context", help="the kubeconfig context to use")
    save.add_argument("--timeout", type=float, default=30.0, help="seconds to wait")
    return parser


def _test_body(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"method": args.method, "path": args.path}
    if args.data is not None:
        spec["body"] = json.loads(args.data)
    if args.save_sample:
        spec["saveAsSample"] = {"label": args.save_sample}
    return runs.new_test(args.connection, spec)


def _report(test: dict[str, Any], done: ConnectionTestOutcome, output: str) -> int:
    status = test.get("status", {})
    code = PASSED if done.passed else FAILED
    if output == "json":
        print(json.dumps({"name": done.name, "status": status}, indent=2))
        return code
    verdict = "PASSED" if code == PASSED else "FAILED"
    print(f"{verdict} {done.reason}: {done.message}")
    print(f"ConnectionTest {done.name}")
    response = done.response
    if response:
        print(f"HTTP {response['statusCode']} {response.get('contentType', '')}")
        print(response.get("body", ""))
        if response.get("truncated"):
            print(f"... (truncated; {response.get('sizeBytes')} bytes in all)")
    if done.sample:
        print(f"saved as sample {done.sample!r}")
    elif code == PASSED:
        print(f"to keep it as a sample: gatehouse save-sample {done.name} --label …")
    return code


def _read_test(api: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    found = api.get_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        CONNECTION_TEST.plural,
        name,
        _request_timeout=kubeconfig.REQUEST_TIMEOUT,
    )
    return cast(dict[str, Any], found)


def save_sample(args: argparse.Namespace) -> int:
    label = args.label.strip()
    if not 1 <= len(label) <= SAMPLE_LABEL_CHARS:
        print(f"gatehouse: --label: 1 to {SAMPLE_LABEL_CHARS} characters", file=sys.stderr)
        return NOT_RUN
    namespace = kubeconfig.load(args.context, args.namespace)
    api = client.CustomObjectsApi()
    try:
        with kubeconfig.reaching_the_cluster():
            refused = runs.save_request(_read_test(api, namespace, args.test), label)
            if refused is not None:
                print(f"NOT SAVED {refused.reason}: {refused.message}")
                return FAILED
            api.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                CONNECTION_TEST.plural,
                args.test,
                {"metadata": {"annotations": {SAVE_AS_SAMPLE_ANNOTATION: label}}},
                _request_timeout=kubeconfig.REQUEST_TIMEOUT,
            )
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                time.sleep(0.3)
                answer = runs.saved(_read_test(api, namespace, args.test))
                if answer is None:
                    continue
                if answer.saved:
                    print(f"saved as sample {answer.sample!r}")
                    return PASSED
                print(f"NOT SAVED {answer.reason}: {answer.message}")
                return FAILED
    except client.ApiException as error:
        print(f"gatehouse: {kubeconfig.refusal(error)}", file=sys.stderr)
        return NOT_RUN
    late = f"ConnectionTest {namespace}/{args.test} was not saved in time"
    print(f"gatehouse: {late}", file=sys.stderr)
    return NOT_RUN


def test(args: argparse.Namespace) -> int:
    try:
        body = _test_body(args)
    except ValueError as error:
        print(f"gatehouse: --data is not JSON: {error}", file=sys.stderr)
        return NOT_RUN
    namespace = kubeconfig.load(args.context, args.namespace)
    api = client.CustomObjectsApi()
    name = body["metadata"]["name"]
    try:
        with kubeconfig.reaching_the_cluster():
            api.create_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                CONNECTION_TEST.plural,
                body,
                _request_timeout=kubeconfig.REQUEST_TIMEOUT,
            )
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                found = _read_test(api, namespace, name)
                done = runs.outcome(found)
                if done is not None:
                    return _report(found, done, args.output)
                time.sleep(0.3)
    except client.ApiException as error:
        print(f"gatehouse: {kubeconfig.refusal(error)}", file=sys.stderr)
        return NOT_RUN
    print(f"gatehouse: ConnectionTest {namespace}/{name} did not finish in time", file=sys.stderr)
    return NOT_RUN


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return save_sample(args) if args.command == "save-sample" else test(args)
    except kubeconfig.ClusterError as error:
        print(f"gatehouse: {error}", file=sys.stderr)
        return NOT_RUN


if __name__ == "__main__":
    sys.exit(main())
