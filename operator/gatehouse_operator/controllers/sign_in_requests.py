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
    SignInRequestStatus,
    StoredSignInRequest,
)
from gatehouse_operator.keys import sign_in_codes
from gatehouse_operator.runtime import Runtime

log = logging.getLogger("gatehouse.operator")
PLURAL = SIGN_IN_REQUEST.plural
# A request the operator never answered (it was down) is deleted this long after it was made.
UNANSWERED_SECONDS = 2 * CODE_SECONDS


def _stamp(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def late(request: StoredSignInRequest, now: datetime.datetime) -> bool:
    """Whether a request's code can no longer be used (or it was never answered)."""
    if request.status.expires_at:
        return now >= datetime.datetime.fromisoformat(request.status.expires_at)
    created = datetime.datetime.fromisoformat(request.metadata.creation_timestamp)
    return now >= created + datetime.timedelta(seconds=UNANSWERED_SECONDS)


async def answer(runtime: Runtime, request: StoredSignInRequest) -> None:
    """Writes the sealed code into a new request's status; a request answered already, or late,
    is left alone (the sweep deletes it)."""
    meta = request.metadata
    now = datetime.datetime.now(datetime.UTC)
    if request.status.code_digest or late(request, now):
        return
    issued = sign_in_codes.issue(request.spec.public_key, meta.namespace, meta.name, meta.uid)
    status = SignInRequestStatus(
        sealed_code=issued.sealed,
        code_digest=issued.code_digest,
        expires_at=_stamp(now + datetime.timedelta(seconds=CODE_SECONDS)),
        page_url=runtime.settings.page_url,
    )
    await runtime.kube.resources.patch_status(
        SIGN_IN_REQUEST,
        meta.namespace,
        meta.name,
        status.model_dump(by_alias=True, exclude_defaults=True, mode="json"),
    )
    log.info(
        "sign-in request %s/%s of %s answered",
        meta.namespace,
        meta.name,
        request.spec.requester.username,
    )


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
async def request_created(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    try:
        request = StoredSignInRequest.model_validate(dict(body))
    except ValidationError:  # written before a schema change: nobody signs in with it
        meta = body["metadata"]
        await memo.runtime.kube.resources.delete_custom(
            SIGN_IN_REQUEST, meta["namespace"], meta["name"]
        )
        return
    await answer(memo.runtime, request)


async def expire_late(runtime: Runtime) -> None:
    """Deletes the requests whose code is late, or that do not parse (run by housekeeping)."""
    now = datetime.datetime.now(datetime.UTC)
    for body in await runtime.kube.resources.existing(SIGN_IN_REQUEST):
        try:
            gone = late(StoredSignInRequest.model_validate(body), now)
        except ValidationError:
            gone = True
        if gone:
            meta = body["metadata"]
            await runtime.kube.resources.delete_custom(
                SIGN_IN_REQUEST, meta["namespace"], meta["name"]
            )
