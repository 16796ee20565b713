"""Whether string filters are case sensitive: the most specific setting wins.

Precedence, highest first: the dimension's own setting, the explore's (the model's
``meta.case_sensitive``), the project's ``defaults.case_sensitive``, then the built-in ``true``.
"""

from __future__ import annotations

LEVELS = (
    "the dimension's case_sensitive",
    "the model's meta.case_sensitive",
    "defaults.case_sensitive in service.config.yml",
)


def case_sensitive(
    dimension: bool | None = None, explore: bool | None = None, project: bool | None = None
) -> tuple[bool, str]:
    """The setting in force, and which level it comes from."""
    for setting, level in zip((dimension, explore, project), LEVELS, strict=True):
        if setting is not None:
            return setting, level
    return True, "the built-in default"
