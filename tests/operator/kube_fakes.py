"""A stand-in for the Kubernetes API, as the operator's ``Kube`` holds it: one fake object that
answers for every part (resources, Secrets, apps' tokens, samples)."""

from __future__ import annotations

from typing import Any, cast

from gatehouse_operator.kube import Kube


def kube_of(fake: object) -> Kube:
    """``fake`` as each of Kube's parts: it implements the calls the test reaches."""
    part = cast(Any, fake)
    return Kube(api=part, resources=part, secrets=part, tokens=part, samples=part)
