"""The routing table's own rules: what a role's session is called."""

from __future__ import annotations

import re

from gatehouse_contract.routes import MAX_ROLE_SESSION_CHARS, role_session_name


def test_a_roles_session_is_named_by_its_connection_within_stss_bound() -> None:
    assert role_session_name("shop/reports") == "shop.reports"
    long = role_session_name("shop/" + "r" * 253)
    other = role_session_name("shop/" + "r" * 252 + "s")
    assert len(long) == len(other) == MAX_ROLE_SESSION_CHARS
    assert long.startswith("shop.rrr")
    assert long != other
    # STS's grammar for RoleSessionName.
    assert re.fullmatch(r"[\w+=,.@-]{2,64}", long)


def test_a_drafts_session_name_is_one_sts_takes() -> None:
    # A draft's routing key ("<namespace>/~draft") is no Kubernetes name, and "~" is not in
    # STS's grammar: STS would refuse every draft test of a role by web identity.
    name = role_session_name("shop/~draft")
    assert re.fullmatch(r"[\w+=,.@-]{2,64}", name, re.ASCII)
    assert name.startswith("shop.")
