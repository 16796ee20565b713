"""``gatehouse-service``: validate ``service.config.yml`` and apply it as a ProjectConfig.

The spec's ``service deploy`` / ``service preview``, under a name of its own: ``service`` is
Debian's init-script tool, which a package must never shadow.

    gatehouse-service validate [--project-dir DIR]       offline: the operator's checks, and the
                                                         file against the dbt project's models
    gatehouse-service explain  MODEL[.DIMENSION] [--project-dir DIR]
                                                         what the rules resolve to for it
    gatehouse-service deploy   [--project-dir DIR] [-n NS] [--context CTX] [--name project]
                               [--dry-run]
    gatehouse-service preview  [--project-dir DIR] [-n NS] [--context CTX] [--name preview]
                               [--dry-run]

The file is found beside ``dbt_project.yml``, and checked against the models the project's
``model-paths`` describe: deploy and preview apply nothing while either has an error. Errors and
warnings carry their file and line.

Deploy uses server-side apply with its own field managers: the file's sections are applied as the
``service-cli`` manager, so the file wins for every key it sets; ``table_groups`` is applied, by
the ``service-cli-table-groups`` manager, only when the file has the key (``{}`` clears the
groups; an absent key leaves the deployed groups as they are). Exit codes: 0 done (warnings
allowed), 1 the file is invalid, 2 the command could not run.
"""

from __future__ import annotations

import argparse
import io
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import JsonValue, ValidationError

from gatehouse_operator.api.meta import API_VERSION, GROUP, VERSION, Model
from gatehouse_operator.api.project_config import PREVIEW_LABEL, PROJECT_CONFIG
from gatehouse_operator.cli import kubeconfig
from gatehouse_operator.errors import GatehouseError
from gatehouse_operator.kube.errors import ApiError
from gatehouse_operator.project_config import catalog, dbt_project, model_checks, yaml_source
from gatehouse_operator.project_config.compiler import Compiled, compile_config
from gatehouse_operator.project_config.dbt_project import DBT_PROJECT, DbtProject
from gatehouse_operator.project_config.explain import NotFound, explain
from gatehouse_operator.project_config.schema import MAX_SPEC_BYTES, ServiceConfig, oversize, rule
from gatehouse_operator.project_config.yaml_source import Document, MappingDocument

FILE_NAME = "service.config.yml"
MANAGER = "service-cli"
TABLE_GROUPS_MANAGER = "service-cli-table-groups"
CATALOG_MANAGER = "service-cli-catalog"
OK, INVALID, NOT_RUN = 0, 1, 2
MAX_SHOWN = 100  # errors, then warnings, printed; the rest are counted


class Failure(GatehouseError):
    """The command cannot run; the message says why."""


class Invalid(GatehouseError):
    """The file cannot be read as a service.config.yml; the message says where and why."""


def find(project_dir: Path) -> MappingDocument | None:
    if not (project_dir / DBT_PROJECT).is_file():
        raise Failure(f"no {DBT_PROJECT} in {project_dir}: point --project-dir at the dbt project")
    path = project_dir / FILE_NAME
    if not path.is_file():
        return None
    try:
        found = yaml_source.read(path, MAX_SPEC_BYTES)
    except yaml_source.YamlProblem as problem:
        raise Invalid(str(problem)) from None
    except OSError as error:
        raise Failure(f"cannot read {path}: {error.strerror}") from None
    sections = found.mapping()
    if sections is None:
        what = "empty" if found.data is None else f"a {type(found.data).__name__}"
        raise Invalid(
            f"{path}:1: the file is {what}; it must be a mapping of sections (spotlight: ...)"
        )
    if too_large := oversize(sections.data):
        raise Invalid(f"{path}:1: {too_large}")
    return sections


@dataclass(frozen=True)
class Checked:
    """The file checked once: its errors and warnings, each as ``file:line: message``, and, when
    it parsed, the file as its model with what it compiled to, for explain and deploy."""

    errors: list[str]
    warnings: list[str] = field(default_factory=list)
    config: ServiceConfig | None = None
    compiled: Compiled | None = None


def check(found: MappingDocument, project: DbtProject) -> Checked:
    """Errors and warnings of the file and of the models."""
    if "catalog" in found.data:
        return Checked(
            [
                f"{found.path}:{found.line_of(('catalog',))}: catalog: not a key of {FILE_NAME}: "
                "deploy writes it from the models' meta.spotlight"
            ]
        )
    try:
        parsed = ServiceConfig.model_validate(found.data)
    except ValidationError as error:
        errors = []
        for item in error.errors(include_url=False):
            location = tuple(item["loc"])
            where = ".".join(str(part) for part in location) or "(file)"
            errors.append(f"{found.path}:{found.line_of(location)}: {where}: {rule(item)}")
        return Checked(errors)
    compiled = compile_config(parsed)
    warnings = [
        f"{found.path}:{found.line_of(tuple(w.path.split('.')))}: warning: {w.message}"
        for w in compiled.warnings
    ]
    findings = model_checks.check(parsed, found, project, compiled.time_intervals)
    return Checked(findings.errors, warnings + findings.warnings, parsed, compiled)


class ApplyMetadata(Model):
    name: str
    labels: dict[str, str] | None = None


class ProjectConfigApply(Model):
    """One server-side apply of the ProjectConfig. Its spec is the file's sections as written
    (checked by ServiceConfig, but sent as the user wrote them) or the models' catalog."""

    api_version: str = API_VERSION
    kind: str = PROJECT_CONFIG.kind
    metadata: ApplyMetadata
    spec: dict[str, JsonValue]


def documents(
    found: MappingDocument, name: str, preview: bool, models: dict[str, JsonValue] | None = None
) -> list[tuple[str, ProjectConfigApply]]:
    """The applies to make, each with its field manager: the file's sections, its table groups
    when it has the key, and ``models`` (the models' resolved catalog settings) when given."""
    metadata = ApplyMetadata(name=name, labels={PREVIEW_LABEL: "true"} if preview else None)
    sections = {key: value for key, value in found.data.items() if key != "table_groups"}
    applies = [(MANAGER, ProjectConfigApply(metadata=metadata, spec=sections))]
    if "table_groups" in found.data:
        groups = found.data["table_groups"] or {}
        table_groups = ProjectConfigApply(metadata=metadata, spec={"table_groups": groups})
        applies.append((TABLE_GROUPS_MANAGER, table_groups))
    if models is not None:
        catalog_apply = ProjectConfigApply(metadata=metadata, spec={"catalog": models})
        applies.append((CATALOG_MANAGER, catalog_apply))
    return applies


def models_catalog(
    config: ServiceConfig, compiled: Compiled, project: DbtProject
) -> dict[str, JsonValue]:
    """The models' catalog settings as ``explain`` shows them, for the spec's ``catalog``."""
    resolved = catalog.resolved(config, project.models.values(), compiled.time_intervals)
    return {name: model.model_dump(exclude_none=True) for name, model in resolved.items()}


def apply(
    args: argparse.Namespace, found: MappingDocument, models: dict[str, JsonValue], preview: bool
) -> str:
    namespace = kubeconfig.load(args.context, args.namespace, args.kubeconfig)
    api = kubeconfig.api_client()
    applies = documents(found, args.name, preview, models)
    if args.dry_run:
        # Nothing persists between dry runs, so the server checks the whole file at once.
        spec = {key: value for _, document in applies for key, value in document.spec.items()}
        applies = [(MANAGER, applies[0][1].model_copy(update={"spec": spec}))]
    for manager, document in applies:
        try:
            with kubeconfig.reaching_the_cluster():
                _server_side_apply(api, namespace, args.name, document, manager, args.dry_run)
        except ApiError as error:
            target = f"{PROJECT_CONFIG.kind} {namespace}/{args.name}"
            raise Failure(f"applying {target}: {kubeconfig.refusal(error)}") from None
    synced = "synced" if "table_groups" in found.data else "left as deployed (no table_groups key)"
    suffix = " (dry run)" if args.dry_run else ""
    return (
        f"applied {PROJECT_CONFIG.kind} {namespace}/{args.name}{suffix}; table groups {synced}; "
        f"catalog metadata of {len(models)} model(s) synced"
    )


def _server_side_apply(
    api: kubeconfig.ApiClient,
    namespace: str,
    name: str,
    document: ProjectConfigApply,
    manager: str,
    dry_run: bool,
) -> None:
    """Applies ``document`` as block YAML. The generated client sends JSON, which the API server
    reads as YAML, where a key of a flow mapping ends at 1,024 characters."""
    query: list[tuple[str, str]] = [("fieldManager", manager), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    request = api.param_serialize(
        method="PATCH",
        resource_path="/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}",
        path_params={
            "group": GROUP,
            "version": VERSION,
            "namespace": namespace,
            "plural": PROJECT_CONFIG.plural,
            "name": name,
        },
        query_params=query,
        header_params={
            "Content-Type": "application/apply-patch+yaml",
            "Accept": "application/json",
        },
        body=yaml.safe_dump(
            document.model_dump(by_alias=True, exclude_none=True),
            sort_keys=False,
            allow_unicode=True,
        ),
        auth_settings=["BearerToken"],
    )
    answer = api.call_api(*request, _request_timeout=kubeconfig.REQUEST_TIMEOUT)
    answer.read()  # type: ignore[no-untyped-call]
    api.response_deserialize(answer, {"200": "object", "201": "object"})


def cluster_options() -> argparse.ArgumentParser:
    """The options of every command that reaches the cluster, as kubectl spells them."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("-n", "--namespace", help="default: the context's namespace")
    options.add_argument("--context", help="the kubeconfig context to use")
    options.add_argument(
        "--kubeconfig",
        help="default: $KUBECONFIG, else ~/.kube/config, else (in a Pod) its ServiceAccount",
    )
    return options


COMMANDS = {
    "validate": ("check the file and the models, offline", ""),
    "explain": ("show what the rules resolve to for a model or dimension", ""),
    "deploy": ("apply the file as the project's ProjectConfig", "project"),
    "preview": ("apply the file as a preview ProjectConfig", "preview"),
}


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = cluster_options()
    for command, (summary, default_name) in COMMANDS.items():
        reaches = bool(default_name)
        sub = commands.add_parser(
            command,
            parents=[cluster] if reaches else [],
            help=summary,
            description=f"{summary[0].upper()}{summary[1:]}. The file is found beside "
            f"{DBT_PROJECT}.",
        )
        sub.add_argument(
            "--project-dir", type=Path, default=Path.cwd(), help="default: the current directory"
        )
        if command == "explain":
            sub.add_argument("target", metavar="MODEL[.DIMENSION]")
        if reaches:
            sub.add_argument("--name", default=default_name, help=f"default: {default_name}")
            sub.add_argument("--dry-run", action="store_true", help="validate on the server only")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gatehouse-service",
        description="Validate service.config.yml and apply it as a ProjectConfig.",
    )
    add_commands(parser.add_subparsers(dest="service", required=True, metavar="COMMAND"))
    return run(parser.parse_args(argv), "gatehouse-service")


def run(args: argparse.Namespace, prog: str) -> int:
    # Names come from the user's files, and may hold what the terminal cannot encode.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    project_dir = args.project_dir.resolve()
    try:
        found = find(project_dir)
    except Invalid as invalid:
        print(invalid, file=sys.stderr)
        return INVALID
    except Failure as failure:
        print(f"{prog}: {failure}", file=sys.stderr)
        return NOT_RUN
    project = dbt_project.read(project_dir)
    if found is None and args.service != "explain":
        print(f"{prog}: no {FILE_NAME} beside {DBT_PROJECT}; nothing to do")
        return OK
    if found is None:
        found = Document(str(project_dir / FILE_NAME), {"spotlight": {}}, {})
    checked = check(found, project)
    errors, warnings = checked.errors, checked.warnings
    for lines in (errors, warnings):
        for line in lines[:MAX_SHOWN]:
            print(line, file=sys.stderr)
        if len(lines) > MAX_SHOWN:
            print(f"... and {len(lines) - MAX_SHOWN} more like these", file=sys.stderr)
    if errors or checked.config is None or checked.compiled is None:
        return INVALID
    if args.service == "explain":
        try:
            print("\n".join(explain(checked.config, project, args.target)))
        except NotFound as missing:
            print(f"{prog}: {missing}", file=sys.stderr)
            return INVALID
        return OK
    models = models_catalog(checked.config, checked.compiled, project)
    # The models' metadata is stored with the file: together they must fit, or nothing applies;
    # validate says so too, as CI runs it before deploy.
    if too_large := oversize(
        {**found.data, "catalog": models}, "the file with its models' catalog"
    ):
        print(f"{found.path}:1: {too_large}", file=sys.stderr)
        return INVALID
    if args.service == "validate":
        print(f"{found.path}: valid ({len(warnings)} warning(s), {len(project.models)} model(s))")
        return OK
    try:
        print(apply(args, found, models, preview=args.service == "preview"))
    except (Failure, kubeconfig.ClusterError) as failure:
        print(f"{prog}: {failure}", file=sys.stderr)
        return NOT_RUN
    return OK


if __name__ == "__main__":
    sys.exit(main())
