"""Who is calling, and may they: TokenReview and SubjectAccessReview, asked of the API server.

Gatehouse keeps no users of its own. The service API authenticates a bearer token with a
TokenReview, and every permission — in the API and in the admission webhook — is a
SubjectAccessReview, so RBAC stays the one place access is granted.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubernetes.aio import client
from pydantic import Field

from gatehouse_operator.api.meta import GROUP
from gatehouse_operator.api.stored import Stored
from gatehouse_operator.kube.errors import translate

# A token's review is reused this long: a revoked token keeps working at most this much longer.
TOKEN_CACHE_SECONDS = 10.0
TOKEN_CACHE_SIZE = 1024


class UserInfo(Stored):
    """A review's userInfo as the API server sends it: a field it leaves out is empty."""

    username: str = ""
    uid: str = ""
    groups: list[str] = Field(default_factory=list)
    extra: dict[str, list[str]] = Field(default_factory=dict)


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @classmethod
    def from_user_info(cls, info: Mapping[str, object]) -> User:
        """From an AdmissionReview's or a TokenReview's userInfo, parsed here."""
        parsed = UserInfo.model_validate(info)
        return cls(
            name=parsed.username, uid=parsed.uid, groups=tuple(parsed.groups), extra=parsed.extra
        )


class Access:
    def __init__(self, api: client.ApiClient) -> None:
        # Their refusals raise kube.errors' typed errors, which the service API answers.
        self.authentication = translate(client.AuthenticationV1Api(api))
        self.authorization = translate(client.AuthorizationV1Api(api))
        self._tokens: OrderedDict[str, tuple[float, User | None]] = OrderedDict()

    async def authenticate(self, token: str) -> User | None:
        """The user a bearer token belongs to, or None when the API server does not know it."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        cached = self._tokens.get(digest)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        review = await self.authentication.create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        )
        status = review.status
        user = (
            User.from_user_info(status.user.to_dict())
            if status and status.authenticated and status.user
            else None
        )
        self._tokens[digest] = (time.monotonic() + TOKEN_CACHE_SECONDS, user)
        self._tokens.move_to_end(digest)
        while len(self._tokens) > TOKEN_CACHE_SIZE:
            self._tokens.popitem(last=False)
        return user

    async def allowed(
        self,
        user: User,
        verb: str,
        resource: str,
        namespace: str,
        name: str = "",
        group: str = GROUP,
    ) -> bool:
        review = await self.authorization.create_subject_access_review(
            client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user=user.name,
                    uid=user.uid or None,
                    groups=list(user.groups) or None,
                    extra={key: list(value) for key, value in user.extra.items()} or None,
                    resource_attributes=client.V1ResourceAttributes(
                        group=group,
                        resource=resource,
                        verb=verb,
                        namespace=namespace,
                        name=name or None,
                    ),
                )
            )
        )
        return bool(review.status and review.status.allowed)
