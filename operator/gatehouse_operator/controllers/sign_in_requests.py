"""SignInRequest: answer each with a one-time code sealed to its key; delete it once late.

The admission webhook admitted the request only if its requester is its creator (see
controllers.admission); the code answers for that requester alone, for ``CODE_SECONDS``. The
page deletes a request whose code it exchanged; the housekeeping sweep deletes the others once
late, so no request outlives its code for long (a sweep, not a kopf timer, which would put a
finalizer on every request).
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

import kopf
from pydantic import ValidationError

from gatehouse_operator.api.meta import GROUP, VERSION
from gatehouse_operator.api.sign_in_request import (
    CODE_SECONDS,
    SIGN_IN_REQUEST,
    SignInRequestSpec,
    SignInRequestStatus,
)
from gatehouse_operator.keys import sign_in_codes
from gatehouse_operator.runtime import Runtime

log = logging.getLogger("gatehouse.operator")
PLURAL = SIGN_IN_REQUEST.plural
# A request the operator never answered (it was down) is deleted this long after it was made.
UNANSWERED_SECONDS = 2 * CODE_SECONDS


def _stamp(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def late(body: dict[str, Any], now: datetime.datetime) -> bool:
    """Whether a stored request's code can no longer be used (or it was never answered)."""
    status = SignInRequestStatus.model_validate(body.get("status") or {})
    if status.expires_at:
        return now >= datetime.datetime.fromisoformat(status.expires_at)
    created = datetime.datetime.fromisoformat(body["metadata"]["creationTimestamp"])
    return now >= created + datetime.timedelta(seconds=UNANSWERED_SECONDS)


async def answer(runtime: Runtime, body: dict[str, Any]) -> None:
    """Writes the sealed code into a new request's status; a request answered already, or late,
    is left alone (the sweep deletes it)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    now = datetime.datetime.now(datetime.UTC)
    if (body.get("status") or {}).get("codeDigest") or late(body, now):
        return
    try:
        spec = SignInRequestSpec.model_validate(body.get("spec") or {})
    except ValidationError:
        await runtime.kube.resources.delete_custom(SIGN_IN_REQUEST, namespace, name)
        return
    issued = sign_in_codes.issue(spec.public_key, namespace, name, meta["uid"])
    status = SignInRequestStatus(
        sealed_code=issued.sealed,
        code_digest=issued.code_digest,
        expires_at=_stamp(now + datetime.timedelta(seconds=CODE_SECONDS)),
        page_url=runtime.settings.page_url,
    )
    await runtime.kube.resources.patch_status(
        SIGN_IN_REQUEST,
        namespace,
        name,
        status.model_dump(by_alias=True, exclude_defaults=True, mode="json"),
    )
    log.info("sign-in request %s/%s of %s answered", namespace, name, spec.requester.username)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
async def request_created(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await answer(memo.runtime, dict(body))


async def expire_late(runtime: Runtime) -> None:
    """Deletes the requests whose code is late (run by housekeeping)."""
    now = datetime.datetime.now(datetime.UTC)
    for body in await runtime.kube.resources.existing(SIGN_IN_REQUEST):
        if late(body, now):
            meta = body["metadata"]
            await runtime.kube.resources.delete_custom(
                SIGN_IN_REQUEST, meta["namespace"], meta["name"]
            )
