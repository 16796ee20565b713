"""``gatehouse``: Gatehouse from the command line, as one CLI family (cmctl is the model).

``gatehouse test CONNECTION`` creates a ConnectionTest with the caller's own kubeconfig (so RBAC
decides, as with kubectl), waits for it to finish and prints the outcome. ``gatehouse save-sample
TEST --label LABEL`` keeps a finished, passing test as a sample. ``gatehouse service ...`` is
``gatehouse-service`` (validate, explain, deploy, preview). ``gatehouse seal``, ``reseal`` and
``sealing-key`` make credentials that can live in Git (``seal_cli``). ``gatehouse requests``
shows a connection's or an app's recent fetches (``requests_cli``). ``gatehouse open`` opens the
page signed in as the kubeconfig's user (``open_cli``). ``gatehouse connect`` connects a
connection's shared account, or shows and revokes its connected accounts (``connect_cli``).
``gatehouse cache purge`` purges a connection's cached answers (``cache_cli``).
``gatehouse version`` and
``gatehouse completion SHELL`` need no cluster. Installed as ``kubectl-gatehouse`` too, it is
the kubectl plugin ``kubectl gatehouse``. Exit codes: 0 passed (saved, done), 1 the test ran and
failed (was not saved; the file is invalid; a value was left as it was), 2 the command could not
be run (bad arguments, no cluster, refused, timed out).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from typing import cast

import yaml
from pydantic import JsonValue

from gatehouse_contract.observability import version
from gatehouse_operator.api.connection_test import (
    CONNECTION_TEST,
    DEFAULT_TEST_METHOD,
    DEFAULT_TEST_PATH,
    SAMPLE_LABEL_CHARS,
    SAVE_AS_SAMPLE_ANNOTATION,
)
from gatehouse_operator.api.meta import GROUP, VERSION
from gatehouse_operator.api.stored import StoredConnectionTest
from gatehouse_operator.cli import (
    cache_cli,
    completion,
    connect_cli,
    kubeconfig,
    open_cli,
    requests_cli,
    seal_cli,
    service_cli,
)
from gatehouse_operator.connections import runs
from gatehouse_operator.connections.models import ConnectionTestOutcome, SampleSaveOutcome
from gatehouse_operator.kube.errors import ApiError

PASSED, FAILED, NOT_RUN = 0, 1, 2


OUTPUTS = ("text", "json", "yaml")
# The names it is installed under; kubectl runs kubectl-gatehouse for `kubectl gatehouse`.
COMMANDS = ["gatehouse", "kubectl-gatehouse"]


def _parser(prog: str = "gatehouse") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Gatehouse from the command line: open the page, test connections, keep "
        "samples, seal credentials, apply service.config.yml.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cluster = service_cli.cluster_options()
    test = commands.add_parser(
        "test",
        parents=[cluster],
        help="test an ExternalConnection through the proxy",
        description="Creates a ConnectionTest, waits for it and prints the answer.",
    )
    test.add_argument("connection", help="the ExternalConnection's name")
    test.add_argument(
        "-X",
        "--method",
        default=DEFAULT_TEST_METHOD,
        type=str.upper,
        help=f"default: {DEFAULT_TEST_METHOD}",
    )
    test.add_argument(
        "--path", default=DEFAULT_TEST_PATH, help="relative to the base URL, may hold a query"
    )
    test.add_argument("--data", help="a JSON request body (not with GET)")
    test.add_argument(
        "--save-sample",
        metavar="LABEL",
        nargs="?",
        const="",
        help="keep a passing answer as a sample (the label is optional)",
    )
    test.add_argument("--timeout", type=float, default=150.0, help="seconds to wait")
    test.add_argument("-o", "--output", choices=OUTPUTS, default="text", help="default: text")
    save = commands.add_parser(
        "save-sample",
        parents=[cluster],
        help="keep a finished, passing ConnectionTest as a sample",
        description="Asks the operator to keep a passing test's answer as a ConnectionSample.",
    )
    save.add_argument("test", help="the ConnectionTest's name (printed by gatehouse test)")
    save.add_argument(
        "--label", default="", help=f"optional, at most {SAMPLE_LABEL_CHARS} characters"
    )
    save.add_argument("--timeout", type=float, default=30.0, help="seconds to wait")
    save.add_argument("-o", "--output", choices=OUTPUTS, default="text", help="default: text")
    service = commands.add_parser(
        "service",
        help="validate, explain, deploy or preview service.config.yml",
        description="The gatehouse-service commands.",
    )
    service_cli.add_commands(service.add_subparsers(dest="service", required=True))
    seal_cli.add_commands(commands)
    requests_cli.add_command(commands)
    open_cli.add_command(commands)
    connect_cli.add_command(commands)
    cache_cli.add_command(commands)
    shown = commands.add_parser(
        "version", help="print the version", description="The CLI's version; no cluster needed."
    )
    shown.add_argument("-o", "--output", choices=OUTPUTS, default="text", help="default: text")
    shell = commands.add_parser(
        "completion",
        help="print a shell completion script",
        description="bash: source <(gatehouse completion bash); zsh likewise; fish: gatehouse "
        "completion fish | source.",
    )
    shell.add_argument("shell", choices=completion.SHELLS)
    return parser


def _print(value: dict[str, JsonValue], output: str) -> None:
    if output == "yaml":
        print(yaml.safe_dump(value, sort_keys=False, allow_unicode=True), end="")
    else:
        print(json.dumps(value, indent=2))


def show_version(args: argparse.Namespace) -> int:
    about: dict[str, JsonValue] = {"gatehouse": version(), "python": platform.python_version()}
    if args.output == "text":
        print(f"gatehouse {about['gatehouse']} (Python {about['python']})")
    else:
        _print(about, args.output)
    return PASSED


def _test_spec(args: argparse.Namespace) -> dict[str, JsonValue]:
    """The test's spec as given: the API server checks it, and its refusal is what is shown."""
    spec: dict[str, JsonValue] = {"method": args.method, "path": args.path}
    if args.data is not None:
        spec["body"] = json.loads(args.data)
    if args.save_sample is not None:
        spec["saveAsSample"] = {"label": args.save_sample}
    return spec


def _report(status: JsonValue, done: ConnectionTestOutcome, output: str) -> int:
    code = PASSED if done.passed else FAILED
    if output != "text":
        _print({"name": done.name, "status": status}, output)
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


def _read_test(
    api: kubeconfig.CustomObjects, namespace: str, name: str
) -> tuple[StoredConnectionTest, JsonValue]:
    """The test as stored, and its status as read: ``-o json`` and ``-o yaml`` show it as is."""
    found = api.get_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        CONNECTION_TEST.plural,
        name,
        _request_timeout=kubeconfig.REQUEST_TIMEOUT,
    )
    body = cast(dict[str, JsonValue], found)  # the client returns the JSON it was sent
    return StoredConnectionTest.of(body), body.get("status", {})


def _saved_report(answer: SampleSaveOutcome, output: str) -> int:
    if output != "text":
        _print(answer.model_dump(by_alias=True), output)
    elif answer.saved:
        print(f"saved as sample {answer.sample!r}")
    else:
        print(f"NOT SAVED {answer.reason}: {answer.message}")
    return PASSED if answer.saved else FAILED


def save_sample(args: argparse.Namespace) -> int:
    label = args.label.strip()
    if len(label) > SAMPLE_LABEL_CHARS:
        print(
            f"gatehouse: --label: at most {SAMPLE_LABEL_CHARS} characters (or none)",
            file=sys.stderr,
        )
        return NOT_RUN
    namespace = kubeconfig.load(args.context, args.namespace, args.kubeconfig)
    api = kubeconfig.custom_objects()
    try:
        with kubeconfig.reaching_the_cluster():
            found, _ = _read_test(api, namespace, args.test)
            refused = runs.save_request(found, label)
            if refused is not None:
                return _saved_report(refused, args.output)
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
                answer = runs.saved(_read_test(api, namespace, args.test)[0])
                if answer is not None:
                    return _saved_report(answer, args.output)
    except ApiError as error:
        print(f"gatehouse: {kubeconfig.refusal(error)}", file=sys.stderr)
        return NOT_RUN
    late = f"ConnectionTest {namespace}/{args.test} was not saved in time"
    print(f"gatehouse: {late}", file=sys.stderr)
    return NOT_RUN


def test(args: argparse.Namespace) -> int:
    try:
        body = runs.new_test(args.connection, _test_spec(args)).body()
    except ValueError as error:
        print(f"gatehouse: --data is not JSON: {error}", file=sys.stderr)
        return NOT_RUN
    namespace = kubeconfig.load(args.context, args.namespace, args.kubeconfig)
    api = kubeconfig.custom_objects()
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
                found, status = _read_test(api, namespace, name)
                done = runs.outcome(found)
                if done is not None:
                    return _report(status, done, args.output)
                time.sleep(0.3)
    except ApiError as error:
        print(f"gatehouse: {kubeconfig.refusal(error)}", file=sys.stderr)
        return NOT_RUN
    print(f"gatehouse: ConnectionTest {namespace}/{name} did not finish in time", file=sys.stderr)
    return NOT_RUN


def main(argv: list[str] | None = None, prog: str = "gatehouse") -> int:
    parser = _parser(prog)
    args = parser.parse_args(argv)
    if args.command == "version":
        return show_version(args)
    if args.command == "completion":
        print(completion.script(args.shell, parser, COMMANDS), end="")
        return PASSED
    if args.command == "service":
        return service_cli.run(args, prog)
    if args.command == "requests":
        return requests_cli.run(args, prog)
    if args.command == "open":
        return open_cli.run(args, prog)
    if args.command == "connect":
        return connect_cli.run(args, prog)
    if args.command == "cache":
        return cache_cli.run(args, prog)
    if args.command in ("seal", "reseal", "sealing-key"):
        return seal_cli.run(args, prog)
    try:
        return save_sample(args) if args.command == "save-sample" else test(args)
    except kubeconfig.ClusterError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return NOT_RUN


def kubectl_plugin() -> int:
    """``kubectl gatehouse ...``: kubectl runs the kubectl-gatehouse executable on PATH."""
    return main(prog="kubectl gatehouse")


def kubectl_completion() -> int:
    """kubectl's completion of ``kubectl gatehouse ...``: it runs kubectl_complete-gatehouse."""
    print(completion.cobra_answer(_parser("kubectl gatehouse"), sys.argv[1:]), end="")
    return PASSED


if __name__ == "__main__":
    sys.exit(main())
