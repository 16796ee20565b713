"""Whether string filters are case sensitive: the most specific setting wins.

Precedence, highest first: the dimension's own setting, the explore's (the model's
``meta.case_sensitive``), the project's ``defaults.case_sensitive``, then the built-in ``true``.
"""

from __future__ import annotations


def case_sensitive(
    dimension: bool | None = None, explore: bool | None = None, project: bool | None = None
) -> bool:
    for setting in (dimension, explore, project):
        if setting is not None:
            return setting
    return True
