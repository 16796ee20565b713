"""The user ClusterRoles the chart ships: generated from ``api.roles``, and what each may do."""

from __future__ import annotations

from pathlib import Path

from gatehouse_operator.api import roles

ROOT = Path(__file__).resolve().parents[2]


def test_the_charts_user_roles_are_the_generated_ones() -> None:
    assert roles.output_file(ROOT).read_text() == roles.render(), (
        "the chart's user roles differ from gatehouse_operator.api.roles: run `make crds`"
    )


def test_the_developer_deploys_the_project_file_and_nothing_else() -> None:
    by_name = {
        role["metadata"]["name"]: role
        for role in (r.model_dump(by_alias=True) for r in roles.roles())
    }
    developer = by_name[roles.DEVELOPER_ROLE]
    # What gatehouse-service deploy and preview (server-side apply) and the defaults API ask.
    assert developer["rules"] == [
        {
            "apiGroups": ["gatehouse.dev"],
            "resources": ["projectconfigs"],
            "verbs": ["get", "list", "create", "update", "patch"],
        }
    ]
    # As the builder: Kubernetes' edit holds both, the reference's Developer.
    for name in (roles.DEVELOPER_ROLE, roles.BUILDER_ROLE):
        labels = by_name[name]["metadata"]["labels"]
        assert labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
        assert labels["app.kubernetes.io/part-of"] == "gatehouse"
