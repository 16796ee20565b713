"""The condition reasons page: every ``Reason`` and every ``RefusalReason``, where it appears,
and what to do about it."""

from __future__ import annotations

from gatehouse_contract.errors import REFUSAL_REASONS
from gatehouse_dev.docs.markdown import cell, generated, table
from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.api.troubleshooting import REFUSAL_TROUBLESHOOTING, TROUBLESHOOTING

PAGE = "reference/reasons.md"


def render() -> str:
    def rows(working: bool) -> list[list[str]]:
        return [
            [f"`{reason}`", cell(TROUBLESHOOTING[reason].on), cell(TROUBLESHOOTING[reason].text)]
            for reason in sorted(Reason, key=str)
            if TROUBLESHOOTING[reason].working == working
        ]

    refusals = [
        [f"`{reason}`", f"`{code}`", cell(REFUSAL_TROUBLESHOOTING[reason])]
        for code, reason in sorted(REFUSAL_REASONS.items(), key=lambda item: str(item[1]))
    ]
    headers = ["reason", "on", "what it means, and what to do"]
    return "\n".join(
        [
            generated("gatehouse_operator.api.troubleshooting"),
            "# Condition reasons\n",
            "Every reason a condition can give. A resource's printer columns show READY and "
            "REASON (`kubectl get externalconnections,dataapps,charttypes,projectconfigs -A`; "
            "`-o wide` adds the message), and `kubectl describe` its Events. A condition may also "
            "repeat another's reason (Ready repeats the failing condition's), and a "
            "ConnectionTest's Passed may carry the proxy's refusal (as `PathNotAllowed`, "
            "[below](#refused-by-the-proxy)).\n",
            "## Not working\n",
            table(headers, rows(working=False)),
            "## Refused by the proxy\n",
            "A ConnectionTest the proxy refuses, as it would refuse an app's fetch of the same "
            "request, fails with the refusal's reason in its Passed condition: the refusal code "
            "in CamelCase. An app's fetch is answered with the code itself, as `error.code`, and "
            "an HTTP status ([Refusal codes](../troubleshooting.md#refusal-codes)). A code this "
            "release does not know (a newer proxy replica's, during a rolling upgrade) is named "
            "the same way; so is an earlier replica's `test_expired`, `TestExpired`: whether the "
            "request was sent is unknown, so it is not sent again; run a new test.\n",
            table(["reason", "refusal code", "what it means, and what to do"], refusals),
            "## Working\n",
            table(headers, rows(working=True)),
        ]
    )


def pages() -> dict[str, str]:
    return {PAGE: render()}
