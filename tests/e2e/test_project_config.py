"""service.config.yml end to end: `service deploy` / `preview` of the example project, compile
warnings in status and Events, the table-groups sync rule, and the defaults API."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
import yaml

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.waiting import wait_for
from gatehouse_operator.api.project_config import PREVIEW_LABEL
from tests.e2e.conftest import Stack
from tests.e2e.gatehouse_fixtures import get, project_members, run_cli, wait_condition

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "project"
EXAMPLE_GROUPS = ["billing", "cards", "finance", "marketing", "sales", "sales-emea"]


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "project")
    return tmp_path / "project"


def edit(project_dir: Path, **sections: Any) -> None:
    """Rewrites the file with sections replaced; a value of None removes the section."""
    path = project_dir / "service.config.yml"
    data = yaml.safe_load(path.read_text())
    for key, value in sections.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def service(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(cluster, "gatehouse_operator.cli.service_cli", *args)


def deploy(cluster: Cluster, project_dir: Path, namespace: str, *extra: str) -> str:
    done = service(cluster, "deploy", "--project-dir", str(project_dir), "-n", namespace, *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout


def groups(cluster: Cluster, namespace: str, name: str = "project") -> list[str]:
    body = get(cluster, namespace, f"projectconfig/{name}") or {}
    return sorted(body.get("spec", {}).get("table_groups") or {})


def compiled(cluster: Cluster, namespace: str, name: str = "project") -> dict[str, Any]:
    def fresh() -> dict[str, Any] | None:
        body = get(cluster, namespace, f"projectconfig/{name}") or {}
        status = body.get("status", {})
        current = status.get("observedGeneration") == body["metadata"]["generation"]
        return status if current and status.get("conditions") else None

    return wait_for(fresh, timeout=20, interval=0.2, what=f"ProjectConfig {name} compiled")


def test_the_example_deploys_and_compiles(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    assert "table groups synced" in deploy(cluster, project_dir, namespace)
    wait_condition(cluster, namespace, "projectconfig/project", "True", "Compiled")
    status = compiled(cluster, namespace)
    body = get(cluster, namespace, "projectconfig/project") or {}
    assert status["projectUuid"] == body["metadata"]["uid"]
    assert status["warnings"] == []
    result = status["compiled"]
    assert result["timeIntervals"] == {
        "date": ["DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "fiscal_quarter"],
        "timestamp": ["RAW", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "HOUR", "fiscal_quarter"],
    }
    assert result["granularityLabels"] == {"WEEK": "Fiscal week", "QUARTER": "Calendar quarter"}
    assert result["defaults"] == {
        "case_sensitive": False,
        "column_totals": True,
        "pre_aggregate_execution_fallback": True,
    }
    assert result["parameters"] == ["min-order-value", "region", "since", "store"]
    assert result["tableGroups"] == EXAMPLE_GROUPS
    # The file pasted in unchanged: the stored spec is the file.
    stored = body["spec"]
    assert stored["custom_granularities"]["fiscal_quarter"]["sql"].endswith("${COLUMN}))")
    # The models' catalog metadata, as explain resolves it, reaches the status.
    assert "ordered_at_month" in stored["catalog"]["orders"]["dimensions"]
    orders = result["catalog"]["orders"]
    assert "dimensions" not in orders
    assert orders["categories"] == ["revenue"]
    assert orders["metrics"]["revenue"]["categories"] == ["revenue", "growth"]
    # Every setting a metric's spotlight may give, read back as the models' files resolve them.
    payments = result["catalog"]["payments"]
    assert payments["owner"] == "finance@jaffle.shop"
    assert payments["metrics"] == {
        "total_paid": {
            "visibility": "show",
            "categories": ["revenue", "growth"],
            "owner": "ana@jaffle.shop",
            "filter_by": ["method", "status"],
            "segment_by": ["method", "paid_at_month"],
            "default_segment": "method",
            "default_filter": {"status": "completed"},
        },
        "refunded": {
            "visibility": "hide",
            "categories": ["revenue"],
            "owner": "finance@jaffle.shop",
        },
    }


def test_a_catalog_edited_by_hand_is_compiled_by_the_clis_rules(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    deploy(cluster, project_dir, namespace)
    patch = {
        "spec": {
            "catalog": {
                "orders": {
                    "dimensions": ["status"],
                    "metrics": {"revenue": {"filter_by": ["status", "colour"]}},
                }
            }
        }
    }
    cluster.kubectl(
        "patch",
        "projectconfig/project",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps(patch),
    )
    status = compiled(cluster, namespace)
    assert [(w["rule"], w["path"]) for w in status["warnings"]] == [
        ("UnknownCatalogDimension", "catalog.orders.metrics.revenue.filter_by")
    ]
    revenue = status["compiled"]["catalog"]["orders"]["metrics"]["revenue"]
    assert "filter_by" not in revenue
    # The next deploy puts back what the models say: the catalog is atomic, so the CLI's
    # manager replaces it whole, the hand-set filter_by included.
    deploy(cluster, project_dir, namespace)
    assert compiled(cluster, namespace)["warnings"] == []


def test_a_catalog_too_large_or_malformed_is_refused_and_the_deployed_one_stays(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    deploy(cluster, project_dir, namespace)
    before = compiled(cluster, namespace)["compiled"]["catalog"]
    # A model of some thousands of long column names: its catalog entry alone passes 256 KiB.
    columns = "".join(f"      - name: {'c' * 80}{n:05}\n" for n in range(3_200))
    (project_dir / "models" / "wide.yml").write_text(
        f"version: 2\nmodels:\n  - name: wide\n    columns:\n{columns}"
    )
    done = service(cluster, "deploy", "--project-dir", str(project_dir), "-n", namespace)
    assert done.returncode == 1, done.stdout
    assert done.stdout == ""
    assert "service.config.yml:1: the file with its models' catalog is " in done.stderr
    assert "bytes as JSON; at most 262,144 are stored" in done.stderr
    body = get(cluster, namespace, "projectconfig/project") or {}
    assert "wide" not in body["spec"]["catalog"]
    assert compiled(cluster, namespace)["compiled"]["catalog"] == before

    # Written by hand, a catalog is checked by the CRD's schema and the webhook, as the file is.
    def create(name: str, catalog: dict[str, Any]) -> str:
        document = {
            "apiVersion": "gatehouse.dev/v1alpha1",
            "kind": "ProjectConfig",
            "metadata": {"name": name, "labels": {PREVIEW_LABEL: "true"}},
            "spec": {"spotlight": {}, "catalog": catalog},
        }
        done = cluster.kubectl(
            "create", "-n", namespace, "-f", "-", stdin=json.dumps(document), check=False
        )
        assert done.returncode != 0, catalog
        assert get(cluster, namespace, f"projectconfig/{name}") is None
        return done.stderr

    assert 'spec.catalog.orders.visibility: Unsupported value: "sometimes"' in create(
        "visibility", {"orders": {"visibility": "sometimes"}}
    )
    assert (
        "spec.catalog.orders.metrics.revenue.colour: unknown key (misspelt, or not a setting "
        "of this section)"
        in create("typo", {"orders": {"metrics": {"revenue": {"colour": "teal"}}}})
    )
    assert "spec.catalog.orders.metrics.revenue.default_filter: Input should be a valid " in (
        create("filter", {"orders": {"metrics": {"revenue": {"default_filter": "completed"}}}})
    )
    wide = {"wide": {"dimensions": [f"{'c' * 80}{n:05}" for n in range(3_200)]}}
    assert "bytes as JSON; at most 262,144 are stored" in create("wide", wide)


def test_compile_warnings_show_in_status_and_describe(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    edit(
        project_dir,
        defaults={
            "additional_time_intervals": {"date": ["HOUR", "fortnight"], "timestamp": ["hour"]},
            "granularity_labels": {"week": "Fiscal week", "sprint": "Sprint"},
        },
    )
    validated = service(cluster, "validate", "--project-dir", str(project_dir))
    assert validated.returncode == 0
    assert validated.stderr.count("warning: Ignoring") == 3
    deploy(cluster, project_dir, namespace)
    status = compiled(cluster, namespace)
    assert [w["rule"] for w in status["warnings"]] == [
        "SubDayIntervalOnDate",
        "UnknownTimeInterval",
        "UnknownGranularityLabel",
    ]
    assert status["compiled"]["timeIntervals"]["date"] == [
        "DAY",
        "WEEK",
        "MONTH",
        "QUARTER",
        "YEAR",
    ]

    def described() -> str | None:
        text = cluster.kubectl("describe", "projectconfig", "project", "-n", namespace).stdout
        return text if "UnknownGranularityLabel" in text.split("Events:")[-1] else None

    text = wait_for(described, timeout=20, interval=0.3, what="the Warning Events")
    status_part, events = text.split("Events:")
    for rule in ("SubDayIntervalOnDate", "UnknownTimeInterval", "UnknownGranularityLabel"):
        assert rule in status_part
        assert rule in events
    assert 'Ignoring unknown granularity "sprint"' in status_part
    assert events.count("Warning") >= 3


def test_a_file_with_more_warnings_than_status_holds_is_stored_with_the_count(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    customs = {f"g{i}": {"label": "G", "sql": "${COLUMN}"} for i in range(80)}
    edit(
        project_dir,
        custom_granularities=customs,
        defaults={
            "additional_time_intervals": {"timestamp": list(customs)},
            # Some names longer than a warning's message may be.
            "granularity_labels": {
                f"sprint{i}" + ("_" + "x" * 2_000 if i < 10 else ""): "S" for i in range(300)
            },
        },
    )
    shutil.rmtree(project_dir / "models")
    deploy(cluster, project_dir, namespace)
    status = compiled(cluster, namespace)
    assert status["conditions"][0]["status"] == "True", status["conditions"]
    assert len(status["warnings"]) == 256
    assert status["warnings"][-1]["message"].startswith("46 more warnings are not listed")
    assert status["warnings"][0]["rule"] == "TooManyTimeIntervals"
    assert len(status["warnings"][1]["message"]) == 1024
    assert len(status["compiled"]["timeIntervals"]["timestamp"]) == 64


def test_table_groups_sync_only_when_the_key_is_present(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    # The parameters are replaced below, and the example's models use the old ones.
    shutil.rmtree(project_dir / "models")
    deploy(cluster, project_dir, namespace)
    assert groups(cluster, namespace) == EXAMPLE_GROUPS

    edit(project_dir, table_groups=None)
    assert "left as deployed" in deploy(cluster, project_dir, namespace)
    assert groups(cluster, namespace) == EXAMPLE_GROUPS

    edit(project_dir, table_groups={})
    deploy(cluster, project_dir, namespace)
    assert groups(cluster, namespace) == []

    edit(project_dir, table_groups={"finance": {"label": "Finance"}})
    deploy(cluster, project_dir, namespace)
    assert groups(cluster, namespace) == ["finance"]

    # An absent key keeps what an earlier deploy set, and the other sections still apply.
    edit(project_dir, table_groups=None, parameters={"only": {"label": "O", "options": ["a"]}})
    deploy(cluster, project_dir, namespace)
    assert groups(cluster, namespace) == ["finance"]
    body = get(cluster, namespace, "projectconfig/project") or {}
    assert list(body["spec"]["parameters"]) == ["only"]


def test_preview_deploys_its_own_project_config_with_table_groups(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    done = service(cluster, "preview", "--project-dir", str(project_dir), "-n", namespace)
    assert done.returncode == 0, done.stderr
    body = get(cluster, namespace, "projectconfig/preview") or {}
    assert body["metadata"]["labels"] == {"gatehouse.dev/preview": "true"}
    assert groups(cluster, namespace, "preview") == EXAMPLE_GROUPS
    assert get(cluster, namespace, "projectconfig/project") is None
    wait_condition(cluster, namespace, "projectconfig/preview", "True", "Compiled")


def test_bad_files_are_refused_with_their_lines_and_nothing_is_applied(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    edit(
        project_dir,
        custom_granularities={"Fiscal Quarter": {"label": "FQ", "sql": "${COLUMN}"}},
        spotlight={"default_visibility": "visible"},
    )
    done = service(cluster, "deploy", "--project-dir", str(project_dir), "-n", namespace)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert any(
        line.endswith(
            "custom_granularities.Fiscal Quarter.[key]: 'Fiscal Quarter' does not match the "
            "pattern '^[a-zA-Z0-9_]+$'"
        )
        and ":" in line.split("service.config.yml")[1]
        for line in lines
    ), done.stderr
    assert any(
        "spotlight.default_visibility: 'visible' is not one of 'show' or 'hide'" in line
        for line in lines
    )
    assert get(cluster, namespace, "projectconfig/project") is None
    dry = service(cluster, "deploy", "--project-dir", str(EXAMPLE), "-n", namespace, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert get(cluster, namespace, "projectconfig/project") is None
    missing = service(cluster, "validate", "--project-dir", str(project_dir.parent))
    assert missing.returncode == 2
    assert "no dbt_project.yml" in missing.stderr


def test_the_crd_names_bad_keys_and_the_operator_reports_the_rest(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    def apply(spec: dict[str, Any], name: str = "direct") -> subprocess.CompletedProcess[str]:
        document = {
            "apiVersion": "gatehouse.dev/v1alpha1",
            "kind": "ProjectConfig",
            # Previews, so several can stand in one namespace.
            "metadata": {"name": name, "labels": {PREVIEW_LABEL: "true"}},
            "spec": {"spotlight": {}, **spec},
        }
        return cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(document), check=False
        )

    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"custom_granularities": {"Fiscal Quarter": {"label": "F", "sql": "x"}}},
            "custom_granularities names must match ^[a-zA-Z0-9_]+$",
        ),
        (
            {"table_groups": {"sales ops": {"label": "S"}}},
            "table_groups names must match ^[a-zA-Z0-9_-]+$",
        ),
        ({"defaults": {"case_sensitve": False}}, "spec.defaults.case_sensitve: unknown key"),
        (
            {"spotlight": {"categories": {"k": {"label": "K", "color": "teal"}}}},
            "spec.spotlight.categories.k.color: Unsupported value",
        ),
    ]
    for spec, message in cases:
        done = apply(spec)
        assert done.returncode != 0, spec
        assert message in done.stderr, (message, done.stderr)

    # What a structural schema cannot say (options are untyped there), the webhook does.
    refused = apply({"parameters": {"p": {"label": "P"}}}, "bare")
    assert refused.returncode != 0
    assert (
        "spec.parameters.p: Value error, a parameter needs options, options_from_dimension "
        "or allow_custom_values: true" in refused.stderr
    )
    webhook_cases: list[tuple[dict[str, Any], str]] = [
        (
            {"parameters": {"d": {"label": "D", "type": "date", "allow_custom_values": True,
                                  "default": "2025-02-30"}}},
            "spec.parameters.d.default: '2025-02-30' is not a real date",
        ),
        (
            {"parameters": {"r": {"label": "R", "options": ["EMEA"], "default": "LATAM"}}},
            "spec.parameters.r.default: 'LATAM' is not one of the options 'EMEA' "
            "(allow_custom_values is not true)",
        ),
        (
            {"custom_granularities": {"week": {"label": "W", "sql": "${COLUMN}"}}},
            "spec.custom_granularities.week.[key]: 'week' is the standard grain WEEK",
        ),
    ]  # fmt: skip
    for spec, message in webhook_cases:
        done = apply(spec, "checked")
        assert done.returncode != 0, spec
        assert message in done.stderr, (message, done.stderr)


def test_sections_with_nothing_under_them_are_empty_with_kubectl_and_deploy(
    cluster: Cluster, stack: Stack, namespace: str, tmp_path: Path
) -> None:
    empty = (
        "spotlight:\n  # default_visibility: hide\nparameters:\ndefaults:\ncustom_granularities:\n"
    )
    (tmp_path / "dbt_project.yml").write_text("name: shop\n")
    (tmp_path / "service.config.yml").write_text(empty)
    deploy(cluster, tmp_path, namespace)
    wait_condition(cluster, namespace, "projectconfig/project", "True", "Compiled")
    document = {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "ProjectConfig",
        "metadata": {"name": "empty", "labels": {PREVIEW_LABEL: "true"}},
        "spec": yaml.safe_load(empty),
    }
    # Server-side: kubectl's client-side apply deletes a key written with no value.
    cluster.kubectl(
        "apply", "--server-side", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(document)
    )
    wait_condition(cluster, namespace, "projectconfig/empty", "True", "Compiled")


def test_unknown_keys_are_refused_whatever_field_validation_the_client_asks_for(
    cluster: Cluster, stack: Stack, namespace: str
) -> None:
    document = {
        "apiVersion": "gatehouse.dev/v1alpha1",
        "kind": "ProjectConfig",
        "metadata": {"name": "typo", "labels": {PREVIEW_LABEL: "true"}},
        "spec": {"spotlight": {}, "defaults": {"case_sensitve": False}},
    }
    for validation in ("Ignore", "Warn", "Strict"):
        done = cluster.kubectl(
            "create",
            f"--validate={validation.lower()}",
            "-n",
            namespace,
            "-f",
            "-",
            stdin=yaml.safe_dump(document),
            check=False,
        )
        assert done.returncode != 0, validation
        assert (
            "spec.defaults.case_sensitve: unknown key (misspelt, or not a setting of this section)"
            in done.stderr
        ), (validation, done.stderr)
    assert get(cluster, namespace, "projectconfig/typo") is None


def test_the_defaults_api_changes_only_the_keys_given(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    members = project_members(cluster, namespace)
    edit(project_dir, defaults={"case_sensitive": False})
    deploy(cluster, project_dir, namespace)
    uuid = compiled(cluster, namespace)["projectUuid"]
    url = f"{stack.local.api_url}/api/v2/projects/{uuid}/defaults"
    admin = members["admin"].headers()

    reply = httpx.put(url, json={"column_totals": False}, headers=admin, timeout=10)
    assert reply.status_code == 200, reply.text
    assert reply.json() == {
        "status": "ok",
        "results": {
            "case_sensitive": False,
            "column_totals": False,
            "pre_aggregate_execution_fallback": True,
        },
    }
    reply = httpx.put(url, json={"pre_aggregate_execution_fallback": False}, headers=admin)
    assert reply.json()["results"]["column_totals"] is False  # kept, unlike the reference
    assert httpx.get(url, headers=members["viewer"].headers()).json() == reply.json()

    for body, says in (
        ({"colour": True}, "colour: unknown key"),
        ({"column_totals": "no"}, "column_totals: 'no' is not a boolean: write true or false"),
    ):
        refused = httpx.put(url, json=body, headers=admin, timeout=10)
        assert refused.status_code == 400
        assert refused.json()["error"]["message"].startswith(says)
    assert httpx.put(url, json={}, headers=admin).status_code == 400
    assert (
        httpx.put(
            url, json={"column_totals": True}, headers=members["builder"].headers()
        ).status_code
        == 403
    )
    assert httpx.get(url, headers=members["nobody"].headers()).status_code == 404
    assert httpx.get(url).status_code == 401
    unknown = url.replace(uuid, "00000000-0000-0000-0000-000000000000")
    assert httpx.get(unknown, headers=admin).status_code == 404

    # A later deploy keeps values set through the API unless the file sets the same keys.
    deploy(cluster, project_dir, namespace)
    assert httpx.get(url, headers=admin).json()["results"]["column_totals"] is False
    edit(project_dir, defaults={"case_sensitive": False, "column_totals": True})
    deploy(cluster, project_dir, namespace)
    after = httpx.get(url, headers=admin).json()["results"]
    assert after["column_totals"] is True
    assert after["pre_aggregate_execution_fallback"] is False


def test_a_caller_who_may_not_read_a_project_learns_nothing_from_its_uuid(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    """The defaults API answers a projectUuid the caller may not read exactly as one that names
    no ProjectConfig; only a caller who may read it is told it may not change it."""
    members = project_members(cluster, namespace)
    deploy(cluster, project_dir, namespace)
    uuid = compiled(cluster, namespace)["projectUuid"]
    unknown = str(uuid4())
    api = f"{stack.local.api_url}/api/v2/projects"

    def answer(method: str, project: str, who: str) -> tuple[int, str]:
        reply = httpx.request(
            method,
            f"{api}/{project}/defaults",
            json={"column_totals": False} if method == "PUT" else None,
            headers=members[who].headers(),
            timeout=30,
        )
        return reply.status_code, reply.text.replace(project, "UUID")

    for method in ("GET", "PUT"):
        hidden = answer(method, uuid, "nobody")
        assert hidden == answer(method, unknown, "nobody"), method
        assert hidden[0] == 404
        assert namespace not in hidden[1]
    # gatehouse-viewer may read the project file but not change it: told so, by name.
    status, text = answer("PUT", uuid, "plain-viewer")
    assert status == 403
    assert f"projectconfigs/project in namespace {namespace}" in text
    assert answer("GET", uuid, "plain-viewer")[0] == 200


def test_a_namespace_has_one_project_file_and_any_number_of_previews(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    deploy(cluster, project_dir, namespace)
    second = service(
        cluster, "deploy", "--project-dir", str(project_dir), "-n", namespace, "--name", "other"
    )
    assert second.returncode == 2
    assert "the namespace already has the ProjectConfig 'project'" in second.stderr
    assert "gatehouse-service deploy --name project" in second.stderr
    assert get(cluster, namespace, "projectconfig/other") is None

    for name in ("preview", "preview-pr-7"):
        done = service(
            cluster, "preview", "--project-dir", str(project_dir), "-n", namespace, "--name", name
        )
        assert done.returncode == 0, done.stderr
    # A preview cannot be promoted beside the project file, with kubectl either.
    promoted = cluster.kubectl(
        "label", "projectconfig", "preview", f"{PREVIEW_LABEL}-", "-n", namespace, check=False
    )
    assert promoted.returncode != 0
    assert "already has the ProjectConfig 'project'" in promoted.stderr
    # The project file itself stays editable, and can move once the old one is gone.
    edit(project_dir, defaults={"column_totals": False})
    deploy(cluster, project_dir, namespace)
    cluster.kubectl("delete", "projectconfig", "project", "-n", namespace)
    deploy(cluster, project_dir, namespace, "--name", "other")


def test_a_model_written_for_the_reference_deploys_and_reads_back_in_explain(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path
) -> None:
    """The example's payments model is written as the reference writes models now: catalog
    metadata on the model and its metrics, a parameter named with its model, groups five deep."""
    assert "table groups synced" in deploy(cluster, project_dir, namespace)
    wait_condition(cluster, namespace, "projectconfig/project", "True", "Compiled")
    status = compiled(cluster, namespace)
    assert status["warnings"] == []
    # The project's catalog metadata is kept in the status; the models' is not deployed (the
    # spec is service.config.yml), so it is checked and shown by the CLI from the files.
    assert status["compiled"]["categories"] == ["growth", "ops", "revenue"]
    assert status["compiled"]["defaultVisibility"] == "show"
    assert status["compiled"]["tableGroups"] == EXAMPLE_GROUPS
    explained = service(cluster, "explain", "payments", "--project-dir", str(project_dir))
    assert explained.returncode == 0, explained.stderr
    lines = explained.stdout.splitlines()
    for line in (
        "  sidebar: Sales > EMEA > Finance > Billing > Card payments  "
        "(meta.groups: sales > sales-emea > finance > billing > cards)",
        "  sql_filter: ${TABLE}.method IN ('card', 'gift_card')",
        "  catalog: visibility show, categories revenue, owner finance@jaffle.shop "
        "(the model's spotlight.owner)",
        "    catalog: visibility show, categories revenue, growth, owner ana@jaffle.shop "
        "(the metric's spotlight.owner)",
        "    filter by: method, status",
        "    segment by: method, paid_at_month (default method)",
        '    default filter: status: "completed"',
    ):
        assert line in lines, (line, explained.stdout)


def test_a_developer_deploys_the_project_file_and_changes_its_defaults(
    cluster: Cluster, stack: Stack, namespace: str, project_dir: Path, tmp_path: Path
) -> None:
    """gatehouse-developer (a CI account's role) may deploy and preview the file and change its
    defaults; a builder may do neither; the developer may do nothing else."""
    members = project_members(cluster, namespace)

    def as_member(name: str, *args: str) -> subprocess.CompletedProcess[str]:
        member = members[name]
        kubeconfig = cluster.token_kubeconfig(name, member.token, tmp_path / f"{name}.kubeconfig")
        return service(
            cluster, *args, "--project-dir", str(project_dir), "-n", namespace,
            "--kubeconfig", str(kubeconfig),
        )  # fmt: skip

    refused = as_member("builder", "deploy")
    assert refused.returncode == 2
    assert "forbidden" in refused.stderr, refused.stderr
    assert f"system:serviceaccount:{namespace}:builder" in refused.stderr, refused.stderr
    assert get(cluster, namespace, "projectconfig/project") is None

    for command in (("deploy", "--dry-run"), ("deploy",), ("preview",), ("deploy",)):
        done = as_member("developer", *command)
        assert done.returncode == 0, (command, done.stderr)
    assert groups(cluster, namespace) == EXAMPLE_GROUPS
    assert groups(cluster, namespace, "preview") == EXAMPLE_GROUPS
    uuid = compiled(cluster, namespace)["projectUuid"]

    url = f"{stack.local.api_url}/api/v2/projects/{uuid}/defaults"
    body = {"column_totals": False}
    builder = httpx.put(url, json=body, headers=members["builder"].headers(), timeout=10)
    assert builder.status_code == 403, builder.text
    changed = httpx.put(url, json=body, headers=members["developer"].headers(), timeout=10)
    assert changed.status_code == 200, changed.text
    assert changed.json()["results"]["column_totals"] is False

    # Nothing else: not deleting the project file, no app, no connection, no Secret.
    developer = members["developer"].persona
    for verb, resource in (
        ("delete", "projectconfigs.gatehouse.dev"),
        ("create", "dataapps.gatehouse.dev"),
        ("get", "externalconnections.gatehouse.dev"),
        ("link", "externalconnections.gatehouse.dev"),
        ("get", "secrets"),
    ):
        done = cluster.kubectl(
            "auth", "can-i", verb, resource, "-n", namespace, as_user=developer, check=False
        )
        assert done.stdout.strip() == "no", (verb, resource)
    deleted = cluster.kubectl(
        "delete", "projectconfig", "project", "-n", namespace, as_user=developer, check=False
    )
    assert deleted.returncode != 0
    assert "forbidden" in deleted.stderr.lower()
