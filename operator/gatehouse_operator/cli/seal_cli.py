"""``gatehouse seal``, ``gatehouse reseal`` and ``gatehouse sealing-key``: credentials sealed to
the operator, ready to commit (see ``gatehouse_operator.keys.sealed_values``).

- ``seal`` reads the secret from stdin or ``--from-file`` (never from the command line, where
  shell history and ``ps`` keep it), seals it for one connection (its namespace, name and
  baseURL; an OAuth 2.0 client secret also for its tokenURL and clientId) with the operator's
  public key, fetched from the cluster or given with ``--cert`` for offline use, and prints the
  connection's YAML with ``spec.auth.sealedSecret`` in place of ``secretRef``, a merge patch, or
  the bare value. With ``--tls-cert`` and ``--tls-key`` it seals a client certificate and its
  key instead, for ``spec.tls.clientCertificate.sealed`` (a value that opens for that use alone).
- ``reseal`` rewrites the sealed values of a file that were sealed with an older key (auth
  secrets and client certificates): the operator offers each resealed in its connection's status
  (it alone can open them), and an offer is written only if it is sealed for the file's
  connection (namespace, name, origin, and an OAuth 2.0 connection's token URL and client id, or
  a client certificate's use) with the cluster's active public key: whoever may write a status
  must not choose what Git holds.
- ``sealing-key public`` prints the public keys (for ``--cert``); ``sealing-key rotate`` makes a
  new active key in the sealing keys' Secret (the first one in a Secret brought without them),
  and ``sealing-key retire`` drops an old one, for whoever may update that Secret.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import io
import json
import sys
from pathlib import Path
from typing import Any, cast

from ruamel.yaml import YAML

from gatehouse_operator.api.auth_kinds import AUTH_KINDS, ENDPOINT_FIELDS, ENDPOINT_SECTIONS
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.meta import GROUP, VERSION
from gatehouse_operator.cli import kubeconfig
from gatehouse_operator.cli.service_cli import cluster_options
from gatehouse_operator.connections.origin import OriginError, normalise_origin, normalise_token_url
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.keys.client_certificates import check_client_certificate
from gatehouse_operator.keys.credentials import CredentialProblem
from gatehouse_operator.keys.sealed_values import (
    SEALING_KEYS_FILE,
    TLS_CLIENT_CERTIFICATE,
    PublicSealingKeys,
    Scope,
    SealedValue,
    SealedValueProblem,
    SealingKeys,
    SealingKeysError,
)
from gatehouse_operator.kube.errors import ApiError, NotFound

DONE, NOT_DONE, NOT_RUN = 0, 1, 2
# The chart's defaults: release "gatehouse" in namespace gatehouse-system.
CONTROLLER_NAMESPACE = "gatehouse-system"
CONTROLLER_NAME = "gatehouse-sealing-keys"
SEALING_KEYS_SECRET = "gatehouse-sealing-keys"  # noqa: S105 (a Secret's name)
# A credential is at most a 16 KiB service-account key file; more on stdin is a mistake.
MAX_SECRET_BYTES = 64 * 1024


class SealError(GatehouseError):
    """Why nothing was sealed, in one line that names the option or the field."""


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = cluster_options()
    keys = argparse.ArgumentParser(add_help=False)
    keys.add_argument(
        "--controller-namespace",
        default=CONTROLLER_NAMESPACE,
        help=f"where Gatehouse is installed (default: {CONTROLLER_NAMESPACE})",
    )
    keys.add_argument(
        "--controller-name",
        default=CONTROLLER_NAME,
        help=f"the ConfigMap of its public sealing keys (default: {CONTROLLER_NAME})",
    )
    seal = commands.add_parser(
        "seal",
        parents=[cluster, keys],
        help="seal a secret for one connection, ready to commit",
        description="Reads the secret from stdin or --from-file and prints the connection "
        "with spec.auth.sealedSecret (a value only the operator opens, and only for that "
        "connection's namespace, name and baseURL, and an OAuth 2.0 client secret only for its "
        "tokenURL and clientId).",
    )
    seal.add_argument("-f", "--filename", help="the ExternalConnection's YAML (one per file)")
    seal.add_argument("--name", help="the connection's name (without -f)")
    seal.add_argument("--base-url", help="the connection's baseURL (without -f)")
    seal.add_argument(
        "--token-url",
        help="an OAuth 2.0 connection's tokenURL, with --client-id: its client secret is sealed "
        f"for both (without -f; a file's are read from spec.auth.{' or '.join(ENDPOINT_SECTIONS)})",
    )
    seal.add_argument("--client-id", help="an OAuth 2.0 connection's clientId (without -f)")
    seal.add_argument("--from-file", help="read the secret from this file, not stdin")
    seal.add_argument(
        "--tls-cert",
        help="a client certificate (PEM, its chain after it), with --tls-key: sealed for the "
        "connection's spec.tls.clientCertificate.sealed, in place of the auth secret",
    )
    seal.add_argument("--tls-key", help="the client certificate's private key (PEM)")
    seal.add_argument("--cert", help="the public keys (gatehouse sealing-key public): offline")
    seal.add_argument(
        "-o",
        "--output",
        choices=("yaml", "patch", "value"),
        help="the connection's YAML (default with -f), a merge patch, or the bare value",
    )
    reseal = commands.add_parser(
        "reseal",
        parents=[cluster, keys],
        help="rewrite a file's sealed values under the current sealing key",
        description="Replaces each auth.sealedSecret and tls.clientCertificate.sealed sealed "
        "with an older key by the value the operator offers in the connection's "
        "status.resealedSecret or status.resealedClientCertificate, if it is sealed for the "
        "file's connection (and the same use) with the cluster's active public key.",
    )
    reseal.add_argument("-f", "--filename", required=True, help="a YAML file of connections")
    reseal.add_argument("-w", "--write", action="store_true", help="rewrite the file in place")
    sealing = commands.add_parser(
        "sealing-key",
        help="the operator's sealing keys: print the public ones, rotate, retire",
        description="public: print the public keys (for gatehouse seal --cert). rotate: make "
        "a new active key (older ones stay, to open older values). retire: drop an old key.",
    )
    actions = sealing.add_subparsers(dest="sealing", required=True, metavar="ACTION")
    actions.add_parser("public", parents=[cluster, keys], help="print the public keys")
    secret = argparse.ArgumentParser(add_help=False)
    secret.add_argument(
        "--secret",
        default=f"{CONTROLLER_NAMESPACE}/{SEALING_KEYS_SECRET}",
        help=f"the sealing keys' Secret, namespace/name (default: {CONTROLLER_NAMESPACE}/"
        f"{SEALING_KEYS_SECRET})",
    )
    actions.add_parser("rotate", parents=[cluster, secret], help="make a new active key")
    retire = actions.add_parser(
        "retire",
        parents=[cluster, secret],
        help="drop an old key: values sealed with it open no more",
    )
    retire.add_argument("fingerprint", help="the key to drop (gatehouse sealing-key public)")


def run(args: argparse.Namespace, prog: str) -> int:
    try:
        if args.command == "seal":
            return seal(args)
        if args.command == "reseal":
            return reseal(args)
        if args.sealing == "public":
            print(_public_keys(args).dump(), end="")
            return DONE
        return change_keys(args)
    except (SealError, kubeconfig.ClusterError) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return NOT_RUN
    except ApiError as error:
        print(f"{prog}: {kubeconfig.refusal(error)}", file=sys.stderr)
        return NOT_RUN


def _secret(args: argparse.Namespace) -> bytes:
    if args.from_file:
        try:
            value = Path(args.from_file).read_bytes()
        except OSError as error:
            raise SealError(f"--from-file: {error.strerror}: {args.from_file}") from None
    elif sys.stdin.isatty():
        raise SealError("give the secret on stdin or with --from-file, never as an argument")
    else:
        value = sys.stdin.buffer.read(MAX_SECRET_BYTES + 1)
    if len(value) > MAX_SECRET_BYTES:
        raise SealError(f"the secret is over {MAX_SECRET_BYTES:,} bytes: not a credential")
    # Sealed as given: the operator trims a token's surrounding whitespace (the newline of echo
    # or an editor) and reads a key file whole, as it does a Secret's value.
    if not value.strip():
        raise SealError("the secret is empty")
    return value


def _public_keys(args: argparse.Namespace) -> PublicSealingKeys:
    if getattr(args, "cert", None):
        try:
            return PublicSealingKeys.parse(Path(args.cert).read_bytes())
        except OSError as error:
            raise SealError(f"--cert: {error.strerror}: {args.cert}") from None
        except SealingKeysError as error:
            raise SealError(f"--cert {args.cert}: {error}") from None
    kubeconfig.load(args.context, args.namespace, args.kubeconfig)
    where = f"{args.controller_namespace}/{args.controller_name}"
    try:
        with kubeconfig.reaching_the_cluster():
            found = kubeconfig.core().read_namespaced_config_map(
                args.controller_name,
                args.controller_namespace,
                _request_timeout=kubeconfig.REQUEST_TIMEOUT,
            )
    except NotFound:
        raise SealError(
            f"no ConfigMap {where}: is Gatehouse installed there (--controller-namespace, "
            "--controller-name)? Or seal offline with --cert"
        ) from None
    document = (found.data or {}).get(SEALING_KEYS_FILE)
    if document is None:
        raise SealError(f"ConfigMap {where} has no {SEALING_KEYS_FILE}")
    try:
        return PublicSealingKeys.parse(document)
    except SealingKeysError as error:
        raise SealError(f"ConfigMap {where}: {error}") from None


def _yaml() -> YAML:
    yaml = YAML()  # round trip: comments, order and quoting stay as they were
    yaml.preserve_quotes = True
    yaml.width = 4096  # a sealed value on one line
    return yaml


def _documents(path: str) -> list[Any]:
    try:
        return [doc for doc in _yaml().load_all(Path(path).read_text()) if doc is not None]
    except OSError as error:
        raise SealError(f"-f: {error.strerror}: {path}") from None
    except Exception as error:  # ruamel's parser and scanner errors share no base class
        raise SealError(f"-f {path} is not YAML: {str(error).splitlines()[0]}") from None


def _is_connection(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and doc.get("kind") == EXTERNAL_CONNECTION.kind
        and str(doc.get("apiVersion", "")).startswith(f"{GROUP}/")
    )


def _dump(documents: list[Any]) -> str:
    out = io.StringIO()
    _yaml().dump_all(documents, out)
    return out.getvalue()


def _namespace(args: argparse.Namespace, metadata: Any) -> str:
    given = (metadata or {}).get("namespace") or args.namespace
    if given:
        return str(given)
    if args.cert:
        raise SealError(
            "the connection's namespace: set metadata.namespace or -n (a sealed value opens "
            "only in the namespace it was sealed for)"
        )
    return kubeconfig.load(args.context, None, args.kubeconfig)


def seal(args: argparse.Namespace) -> int:
    documents: list[Any] = []
    connection: Any = None
    if args.filename:
        documents = _documents(args.filename)
        connections = [doc for doc in documents if _is_connection(doc)]
        if args.name:
            connections = [c for c in connections if c.get("metadata", {}).get("name") == args.name]
        if len(connections) != 1:
            raise SealError(
                f"-f {args.filename}: {len(connections)} ExternalConnections"
                f"{' named ' + args.name if args.name else ''}; one is sealed at a time "
                "(--name chooses)"
            )
        connection = connections[0]
        auth_type = ((connection.get("spec") or {}).get("auth") or {}).get("type", "none")
        if auth_type == "none" and not args.tls_cert:
            raise SealError("spec.auth.type is none: the connection takes no secret")
        if args.token_url or args.client_id:
            raise SealError(
                "--token-url and --client-id are for sealing without -f: a file's are read from "
                f"its spec.auth section ({', '.join(ENDPOINT_SECTIONS)})"
            )
        name = str(connection.get("metadata", {}).get("name", ""))
        base_url = str((connection.get("spec") or {}).get("baseURL", ""))
        token_url, client_id, token_field = _token_binding(connection)
        namespace = _namespace(args, connection.get("metadata"))
        where = ("spec.baseURL", token_field)
    else:
        if not (args.name and args.base_url):
            raise SealError("give -f CONNECTION.yaml, or --name and --base-url")
        if bool(args.token_url) != bool(args.client_id):
            raise SealError(
                "give both --token-url and --client-id (an OAuth 2.0 client secret is sealed "
                "for both), or neither"
            )
        name, base_url = args.name, args.base_url
        token_url, client_id = args.token_url or "", args.client_id or ""
        namespace = _namespace(args, None)
        where = ("spec.baseURL", "--token-url")
    if not name:
        raise SealError("the connection has no metadata.name")
    output = args.output or ("yaml" if connection is not None else "value")
    if output == "yaml" and connection is None:
        raise SealError("-o yaml needs -f: the connection to write the value into")
    if args.tls_cert or args.tls_key:
        return _seal_client_certificate(args, documents, connection, namespace, name, base_url)
    scope = _scope(namespace, name, base_url, token_url, client_id, where)
    secret = _secret(args)
    keys = _public_keys(args)
    value = keys.seal(secret, scope)
    if output == "value":
        print(value)
    elif output == "patch":
        print(json.dumps({"spec": {"auth": {"sealedSecret": value, "secretRef": None}}}))
    else:
        auth = connection.setdefault("spec", {}).setdefault("auth", {})
        auth.pop("secretRef", None)
        auth["sealedSecret"] = value
        print(_dump(documents), end="")
    print(f"sealed for {scope} with key {keys.active}", file=sys.stderr)
    return DONE


def _client_certificate(args: argparse.Namespace) -> bytes:
    """The chain and key of --tls-cert and --tls-key, checked as the operator checks them (so a
    wrong pair fails here, not in a condition later): the chain, then the key."""
    if not (args.tls_cert and args.tls_key):
        raise SealError("give both --tls-cert and --tls-key (a certificate is sealed with its key)")
    if args.from_file or args.token_url or args.client_id:
        raise SealError(
            "--tls-cert and --tls-key seal a client certificate alone: no --from-file, "
            "--token-url or --client-id with them"
        )
    read = []
    for option, path in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        try:
            read.append(Path(path).read_bytes())
        except OSError as error:
            raise SealError(f"{option}: {error.strerror}: {path}") from None
    chain, key = read
    try:
        check_client_certificate(
            chain, key, "--tls-cert", "--tls-key", datetime.datetime.now(datetime.UTC)
        )
    except CredentialProblem as problem:
        raise SealError(problem.message) from None
    return chain.rstrip(b"\n") + b"\n" + key


def _seal_client_certificate(
    args: argparse.Namespace,
    documents: list[Any],
    connection: Any,
    namespace: str,
    name: str,
    base_url: str,
) -> int:
    """Seals --tls-cert and --tls-key for the connection's client certificate (a value that
    opens for that use alone) and prints it as -o says."""
    plain = _client_certificate(args)
    try:
        origin = normalise_origin(base_url, allow_http=False)
    except OriginError as error:
        raise SealError(f"spec.baseURL: {error} (a client certificate needs https)") from None
    scope = Scope(namespace, name, origin, use=TLS_CLIENT_CERTIFICATE)
    keys = _public_keys(args)
    value = keys.seal(plain, scope)
    output = args.output or ("yaml" if connection is not None else "value")
    if output == "value":
        print(value)
    elif output == "patch":
        patch = {"clientCertificate": {"sealed": value, "secretRef": None}}
        print(json.dumps({"spec": {"tls": patch}}))
    else:
        tls = connection.setdefault("spec", {}).setdefault("tls", {})
        tls["clientCertificate"] = {"sealed": value}
        print(_dump(documents), end="")
    print(f"sealed for {scope} with key {keys.active}", file=sys.stderr)
    return DONE


def _token_binding(doc: Any) -> tuple[str, str, str]:
    """The tokenURL and clientId of a connection whose kind sends its secret to an endpoint of
    its own (OAuth 2.0 client credentials or authorization code), which its secret is sealed for
    too, and the tokenURL's field; ("", "", "") for other auth types."""
    auth = (doc.get("spec") or {}).get("auth") or {}
    kind = next((kind for kind in AUTH_KINDS.values() if kind.type == auth.get("type")), None)
    if kind is None or not kind.token_endpoint:
        return "", "", ""
    section = auth.get(kind.section) or {}
    token_url, client_id = (section.get(field) for field in ENDPOINT_FIELDS)
    if not (isinstance(token_url, str) and token_url and isinstance(client_id, str) and client_id):
        raise SealError(
            f"spec.auth.{kind.section}: tokenURL and clientId are required (a client "
            "secret is sealed for both)"
        )
    return token_url, client_id, f"spec.auth.{kind.section}.tokenURL"


def _scope(
    namespace: str,
    name: str,
    base_url: str,
    token_url: str,
    client_id: str,
    where: tuple[str, str],
) -> Scope:
    """What the value is bound to, normalised as the operator normalises it: it opens for
    exactly the origin (and token URL) the operator pins. ``where`` names the base URL's and
    the token URL's source in messages."""
    try:
        origin = normalise_origin(base_url, allow_http=True)
    except OriginError as error:
        raise SealError(f"{where[0]}: {error}") from None
    if not token_url:
        return Scope(namespace, name, origin)
    try:
        normalised = normalise_token_url(token_url, allow_http=True)
    except OriginError as error:
        raise SealError(f"{where[1]}: {error}") from None
    return Scope(namespace, name, origin, normalised, client_id)


# The sealed values a connection's file may hold, each offered resealed in a status field of its
# own: where it is under spec, its field, the status field, and what it is sealed for (Scope.use).
_RESEALABLE = (
    (("auth",), "sealedSecret", "resealedSecret", ""),
    (("tls", "clientCertificate"), "sealed", "resealedClientCertificate", TLS_CLIENT_CERTIFICATE),
)


def _section(doc: Any, path: tuple[str, ...]) -> Any:
    """The mapping at ``spec.<path>`` of a connection, {} where there is none."""
    section = doc
    for name in ("spec", *path):
        section = section.get(name) if isinstance(section, dict) else None
    return section if isinstance(section, dict) else {}


def reseal(args: argparse.Namespace) -> int:
    documents = _documents(args.filename)
    default_namespace = kubeconfig.load(args.context, args.namespace, args.kubeconfig)
    api = kubeconfig.custom_objects()
    keys: PublicSealingKeys | None = None
    left = 0
    for doc in documents:
        if not _is_connection(doc):
            continue
        held = [each for each in _RESEALABLE if _section(doc, each[0]).get(each[1])]
        if not held:
            continue
        scope = _file_scope(doc, default_namespace)
        where = f"{scope.namespace}/{scope.name}"
        with kubeconfig.reaching_the_cluster():
            live = cast(
                dict[str, Any],
                api.get_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    scope.namespace,
                    EXTERNAL_CONNECTION.plural,
                    scope.name,
                    _request_timeout=kubeconfig.REQUEST_TIMEOUT,
                ),
            )
        for path, name, offer_field, use in held:
            section = _section(doc, path)
            # The auth secret's lines name no field, as they did before client certificates.
            said = f" {'.'.join(('spec', *path, name))}" if use else ""
            offered = (live.get("status") or {}).get(offer_field, "")
            if _section(live, path).get(name) != section[name]:
                print(f"{where}: the cluster's {'.'.join((*path, name))} differs from the "
                      "file's: apply the file first, then reseal", file=sys.stderr)  # fmt: skip
                left += 1
            elif offered:
                keys = keys or _public_keys(args)
                # Bound as the operator binds it: a client certificate to the connection and
                # its origin alone, for its use.
                bound = Scope(scope.namespace, scope.name, scope.origin, use=use) if use else scope
                _check_offer(str(offered), bound, keys, offer_field)
                section[name] = offered
                print(f"{where}:{said} resealed", file=sys.stderr)
            else:
                print(f"{where}:{said} current", file=sys.stderr)
    rendered = _dump(documents)
    if args.write:
        Path(args.filename).write_text(rendered)
    else:
        print(rendered, end="")
    return NOT_DONE if left else DONE


def _file_scope(doc: Any, default_namespace: str) -> Scope:
    """What the file's connection binds a sealed value to, as the operator binds it."""
    metadata = doc.get("metadata") or {}
    name = str(metadata.get("name") or "")
    if not name:
        raise SealError("an ExternalConnection in the file has no metadata.name")
    base_url = str((doc.get("spec") or {}).get("baseURL", ""))
    try:
        token_url, client_id, token_field = _token_binding(doc)
    except SealError as error:
        raise SealError(f"{name}: {error}") from None
    namespace = str(metadata.get("namespace") or default_namespace)
    where = (f"{name}: spec.baseURL", f"{name}: {token_field}")
    return _scope(namespace, name, base_url, token_url, client_id, where)


def _check_offer(offered: str, scope: Scope, keys: PublicSealingKeys, offer_field: str) -> None:
    """Refuses a resealed value that is not for ``scope`` or not sealed with the cluster's
    active key (whoever may write the connection's status chose it, not the operator)."""
    field = f"{scope.namespace}/{scope.name}: status.{offer_field}"
    try:
        sealed = SealedValue.parse(offered)
    except SealedValueProblem:
        raise SealError(f"{field} is not a sealed value; nothing was written") from None
    if sealed.scope != scope:
        raise SealError(
            f"{field} is sealed for {sealed.scope}, not for the file's connection ({scope}); "
            "nothing was written"
        )
    if sealed.key != keys.active:
        raise SealError(
            f"{field} is sealed with key {sealed.key}, not the cluster's active key "
            f"{keys.active}; nothing was written"
        )


def change_keys(args: argparse.Namespace) -> int:
    """``rotate`` or ``retire``, on the Secret as read: a concurrent change is refused, not
    lost."""
    namespace, _, name = args.secret.partition("/")
    if not (namespace and name):
        raise SealError(f"--secret must be namespace/name, not {args.secret!r}")
    kubeconfig.load(args.context, args.namespace, args.kubeconfig)
    api = kubeconfig.core()
    with kubeconfig.reaching_the_cluster():
        secret = api.read_namespaced_secret(
            name, namespace, _request_timeout=kubeconfig.REQUEST_TIMEOUT
        )
        if secret.metadata is None:
            raise SealError(f"Secret {args.secret} has no metadata")
        current = (secret.data or {}).get(SEALING_KEYS_FILE)
        try:
            keys = SealingKeys.parse(base64.b64decode(current)) if current is not None else None
            if args.sealing == "retire":
                if keys is None:
                    raise SealError(f"Secret {args.secret} has no {SEALING_KEYS_FILE}")
                changed = keys.without(args.fingerprint)
                said = f"sealing key {args.fingerprint} is retired: values sealed with it no "
                said += "longer open"
            else:
                # A Secret brought without sealing keys gets its first.
                changed = keys.rotated() if keys is not None else SealingKeys.generate()
                said = f"sealing key {changed.active} is active; the older keys still open "
                said += "older values"
        except SealingKeysError as error:
            raise SealError(f"Secret {args.secret}: {error}") from None
        patch = {
            # Refused if the Secret changed since it was read: no other change is lost.
            "metadata": {"resourceVersion": secret.metadata.resource_version},
            "data": {SEALING_KEYS_FILE: base64.b64encode(changed.dump().encode()).decode()},
        }
        api.patch_namespaced_secret(
            name, namespace, patch, _request_timeout=kubeconfig.REQUEST_TIMEOUT
        )
    print(said)
    return DONE
