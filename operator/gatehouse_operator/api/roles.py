"""The ClusterRoles users are bound to, generated here so the chart's copy cannot drift.

- ``gatehouse-admin`` holds ``manage:ExternalConnection``: create, edit and delete connections,
  test them, and link any connection; it also deploys ProjectConfigs and changes their defaults
  (it aggregates into the built-in ``admin`` role);
- ``gatehouse-builder`` manages DataApps and ChartTypes and may ``link`` connections whose
  linkPolicy is Builders (aggregates into ``edit``);
- ``gatehouse-developer`` deploys the project's ``service.config.yml`` (``gatehouse-service
  deploy`` and ``preview``) and changes its defaults through the service API, and nothing else
  (aggregates into ``edit``, so ``edit`` is the reference's Developer: builder and developer; the
  builder role alone is its Editor);
- ``gatehouse-interactive-viewer`` (the reference's Interactive Viewer) may view apps and list,
  through the service API, the connections set to Builders; it is bound explicitly, never
  aggregated, so Kubernetes' ``view`` does not grant it;
- ``gatehouse-viewer`` (the reference's Viewer) views apps and the project file, and no
  connection (aggregates into ``view``).

``link`` is a custom verb: RBAC grants it like any other, and Gatehouse asks for it with a
SubjectAccessReview. Aggregation into admin/edit/view is done by kube-controller-manager.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from pydantic import Field

from gatehouse_operator.api.apps import CHART_TYPE, DATA_APP
from gatehouse_operator.api.connection import EXTERNAL_CONNECTION
from gatehouse_operator.api.connection_sample import CONNECTION_SAMPLE
from gatehouse_operator.api.connection_test import CONNECTION_TEST
from gatehouse_operator.api.link_policy import LINK_VERB
from gatehouse_operator.api.meta import GROUP, Model
from gatehouse_operator.api.project_config import PROJECT_CONFIG
from gatehouse_operator.api.sign_in_request import SIGN_IN_REQUEST

READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete", "deletecollection"]
ADMIN_ROLE = "gatehouse-admin"
BUILDER_ROLE = "gatehouse-builder"
DEVELOPER_ROLE = "gatehouse-developer"
INTERACTIVE_VIEWER_ROLE = "gatehouse-interactive-viewer"
VIEWER_ROLE = "gatehouse-viewer"
APPS = [DATA_APP.plural, CHART_TYPE.plural]


class PolicyRule(Model):
    api_groups: list[str] = Field(default_factory=lambda: [GROUP])
    resources: list[str]
    verbs: list[str]


class RoleMetadata(Model):
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]


class ClusterRole(Model):
    """A ClusterRole as the file shows it: its fields in this order."""

    api_version: str = "rbac.authorization.k8s.io/v1"
    kind: str = "ClusterRole"
    metadata: RoleMetadata
    rules: list[PolicyRule]


def _rule(resources: list[str], verbs: list[str]) -> PolicyRule:
    return PolicyRule(resources=resources, verbs=verbs)


# `gatehouse open`: ask for a one-time code to open the page as oneself (get reads the answer).
# The roles of the page's users: not the viewer's, which aggregates into Kubernetes' read-only
# view (which grants no create; the page shows a viewer no connection), nor the developer's,
# which deploys the project file and nothing else.
SIGN_IN = PolicyRule(resources=[SIGN_IN_REQUEST.plural], verbs=["create", "get"])


def _role(
    name: str, aggregate_to: str | None, description: str, rules: list[PolicyRule]
) -> ClusterRole:
    labels = {"app.kubernetes.io/part-of": "gatehouse"}
    if aggregate_to is not None:
        labels[f"rbac.authorization.k8s.io/aggregate-to-{aggregate_to}"] = "true"
    return ClusterRole(
        metadata=RoleMetadata(
            name=name, labels=labels, annotations={"gatehouse.dev/description": description}
        ),
        rules=rules,
    )


def roles() -> list[ClusterRole]:
    return [
        _role(
            ADMIN_ROLE,
            "admin",
            "Holds manage:ExternalConnection: create, edit, delete and test connections; "
            "link any connection.",
            [
                _rule([EXTERNAL_CONNECTION.plural], [*READ, *WRITE, LINK_VERB]),
                _rule([f"{EXTERNAL_CONNECTION.plural}/status"], ["get"]),
                # patch: the save-as-sample annotation on a finished test (specs are immutable).
                _rule(
                    [CONNECTION_TEST.plural],
                    [*READ, "create", "patch", "delete", "deletecollection"],
                ),
                _rule([f"{CONNECTION_TEST.plural}/status"], ["get"]),
                # Samples are written by the operator alone, from passing tests.
                _rule([CONNECTION_SAMPLE.plural], [*READ, "delete", "deletecollection"]),
                _rule(APPS, [*READ, *WRITE]),
                _rule([PROJECT_CONFIG.plural], [*READ, *WRITE]),
                _rule([f"{PROJECT_CONFIG.plural}/status"], ["get"]),
                SIGN_IN,
            ],
        ),
        _role(
            BUILDER_ROLE,
            "edit",
            "Builds data apps and chart types; links connections whose linkPolicy is Builders.",
            [
                _rule(APPS, [*READ, *WRITE]),
                _rule([f"{plural}/status" for plural in APPS], ["get"]),
                _rule([EXTERNAL_CONNECTION.plural], [LINK_VERB]),
                _rule([PROJECT_CONFIG.plural], READ),
                SIGN_IN,
            ],
        ),
        _role(
            DEVELOPER_ROLE,
            "edit",
            "Deploys the project's service.config.yml (gatehouse-service deploy and preview) "
            "and changes its defaults through the service API; nothing else.",
            # Deploy and preview are server-side applies (patch, create when new); the defaults
            # API asks for get and patch; get also shows status.projectUuid. No delete.
            [_rule([PROJECT_CONFIG.plural], ["get", "list", "create", "update", "patch"])],
        ),
        _role(
            INTERACTIVE_VIEWER_ROLE,
            None,
            "Views apps; lists (through the service API) the connections set to Builders. "
            "Bound explicitly: Kubernetes' view role does not include it.",
            [
                _rule(APPS, READ),
                _rule([EXTERNAL_CONNECTION.plural], [LINK_VERB]),
                _rule([PROJECT_CONFIG.plural], READ),
                SIGN_IN,
            ],
        ),
        _role(
            VIEWER_ROLE,
            "view",
            "Views apps and the project file; sees no connection.",
            [_rule(APPS, READ), _rule([PROJECT_CONFIG.plural], READ)],
        ),
    ]


HEADER = "# Generated from gatehouse_operator.api.roles by `make crds`. Do not edit.\n"


def render() -> str:
    return HEADER + yaml.safe_dump_all(
        [role.model_dump(by_alias=True) for role in roles()], sort_keys=False, width=100
    )


def output_file(root: Path) -> Path:
    """Plain YAML (``kubectl apply`` takes it as is); the chart includes it unless
    ``userRoles.create`` is false."""
    return root / "charts" / "gatehouse" / "files" / "user-roles.yaml"


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    output_file(root).write_text(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
