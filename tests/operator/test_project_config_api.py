"""One project file per namespace: which creates and updates are checked, and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from gatehouse_operator.api.project_config import (
    PREVIEW_LABEL,
    becomes_the_project,
    second_project,
)


def meta(name: str, *, preview: bool = False) -> dict[str, Any]:
    return {"name": name, "labels": {PREVIEW_LABEL: "true"}} if preview else {"name": name}


@pytest.mark.parametrize(
    ("new", "old", "checked"),
    [
        (meta("project"), None, True),  # create
        (meta("preview", preview=True), None, False),  # a preview, any number of them
        (meta("project"), meta("project"), False),  # edits of the project file itself
        (meta("project"), meta("project", preview=True), True),  # a preview promoted
        (meta("p", preview=True), meta("p"), False),  # demoted to a preview
        ({"name": "p", "labels": {PREVIEW_LABEL: "yes"}}, None, True),  # only "true" marks one
    ],
)
def test_only_changes_that_make_the_project_file_are_checked(
    new: dict[str, Any], old: dict[str, Any] | None, checked: bool
) -> None:
    assert becomes_the_project(new, old) is checked


def test_a_second_project_file_is_refused_naming_the_first() -> None:
    others = [
        {"metadata": meta("preview", preview=True)},
        {"metadata": meta("project")},
        {"metadata": meta("analytics")},
    ]
    problem = second_project(meta("other"), others)
    assert problem.startswith("the namespace already has the ProjectConfig 'analytics'")
    assert "gatehouse-service deploy --name analytics" in problem
    assert f'{PREVIEW_LABEL}: "true"' in problem


def test_previews_and_the_object_itself_do_not_compete() -> None:
    others = [{"metadata": meta("preview", preview=True)}, {"metadata": meta("project")}]
    assert second_project(meta("project"), others) == ""
    assert second_project(meta("project"), []) == ""
