"""The condition reasons page: every ``Reason``, where it appears, and what to do about it."""

from __future__ import annotations

from gatehouse_dev.docs.markdown import cell, generated, table
from gatehouse_operator.api.conditions import Reason
from gatehouse_operator.api.troubleshooting import TROUBLESHOOTING

PAGE = "reference/reasons.md"


def render() -> str:
    def rows(working: bool) -> list[list[str]]:
        return [
            [f"`{reason}`", cell(TROUBLESHOOTING[reason].on), cell(TROUBLESHOOTING[reason].text)]
            for reason in sorted(Reason, key=str)
            if TROUBLESHOOTING[reason].working == working
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
            "ConnectionTest's Passed may carry the proxy's refusal code (as `PathNotAllowed`).\n",
            "## Not working\n",
            table(headers, rows(working=False)),
            "## Working\n",
            table(headers, rows(working=True)),
        ]
    )


def pages() -> dict[str, str]:
    return {PAGE: render()}
