"""The Pod's own AWS keys from EKS Pod Identity's agent, which a role's keys are asked of STS
with (``AssumeRole``, chained: see :mod:`gatehouse_proxy.credentials.aws_roles`).

EKS gives a Pod whose service account is associated with a role two settings: the agent's URL
(``AWS_CONTAINER_CREDENTIALS_FULL_URI``, ``http://169.254.170.23/v1/credentials``) and a file
holding a token for it (``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE``, which the kubelet rotates:
read again at each ask). The agent answers the keys as JSON (``AccessKeyId``,
``SecretAccessKey``, ``Token``, ``Expiration``). They are the Pod's alone, so each worker keeps its
own, asked once for the requests that need them and again five minutes before they expire; the
role keys signed with them are what the fleet shares.

Where the agent is asked is the installation's: http only to the addresses AWS's SDKs allow for
it (EKS's and ECS's agents, loopback), anything else https. Its answer is read within bounds
(size, time) and never followed elsewhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from yarl import URL

from gatehouse_contract.aws_keys import AwsKeys, AwsKeysError
from gatehouse_proxy.errors import ProxyError

# What AWS's SDKs send a container credentials URL over http to (EKS Pod Identity's agent,
# ECS's, in IPv4 and IPv6); loopback is allowed too.
AGENT_ADDRESSES = frozenset(
    ipaddress.ip_address(address) for address in ("169.254.170.23", "169.254.170.2", "fd00:ec2::23")
)
# The agent's token is a service account token, about 1 KiB; its answer is under 2 KiB.
MAX_AGENT_TOKEN_BYTES = 16 * 1024
MAX_ANSWER_BYTES = 16 * 1024
# Asked again this long before the keys expire (the agent's are valid for hours; a role's keys
# minted at the last moment must not outlive the keys that signed their request).
RENEW_BEFORE_SECONDS = 300.0


def agent_url(url: str) -> str:
    """``url`` if the proxy may ask it for the Pod's keys, as AWS's SDKs decide; a ValueError
    saying why not."""
    target = URL(url)
    if target.scheme == "https" and target.host:
        return url
    if target.scheme != "http" or not target.host:
        raise ValueError(
            f"AWS_CONTAINER_CREDENTIALS_FULL_URI must be an http(s):// URL, not {url!r}"
        )
    try:
        address = ipaddress.ip_address(target.host)
    except ValueError:
        address = None
    if target.host != "localhost" and (
        address is None or not (address.is_loopback or address in AGENT_ADDRESSES)
    ):
        raise ValueError(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI may be http only to EKS Pod Identity's agent "
            f"(169.254.170.23, fd00:ec2::23), ECS's (169.254.170.2) or loopback, not {url!r}"
        )
    return url


@dataclass(frozen=True)
class _Held:
    keys: AwsKeys
    renew_at: float  # monotonic


class PodIdentity:
    """The Pod's keys from EKS Pod Identity's agent, kept until five minutes before they
    expire."""

    def __init__(self, url: str, token_file: Path | None) -> None:
        self.url = url
        self.token_file = token_file
        self._held: _Held | None = None
        self._asking: asyncio.Task[_Held] | None = None
        self._session: aiohttp.ClientSession | None = None

    async def keys(self, seconds: float) -> AwsKeys:
        """The Pod's keys, asked of the agent (within ``seconds``) when none are held or they
        are due; a ProxyError ``credential_failed`` saying why not (never a value)."""
        held = self._held
        if held is not None and time.monotonic() < held.renew_at:
            return held.keys
        if self._asking is None:  # one ask for every request that comes while it is made
            self._asking = asyncio.create_task(self._ask(seconds), name="eks-pod-identity")
            self._asking.add_done_callback(self._asked)
        try:
            async with asyncio.timeout(seconds):
                return (await asyncio.shield(self._asking)).keys
        except TimeoutError:
            raise ProxyError(
                "credential_failed", "EKS Pod Identity's agent did not answer in time"
            ) from None

    def _asked(self, task: asyncio.Task[_Held]) -> None:
        self._asking = None
        # Read here, so that an ask no request waited for to the end is no unread error.
        if not task.cancelled() and task.exception() is None:
            self._held = task.result()

    async def close(self) -> None:
        if self._asking is not None:
            self._asking.cancel()
        if self._session is not None:
            await self._session.close()

    async def _ask(self, seconds: float) -> _Held:
        headers = {"Authorization": await self._token()} if self.token_file else {}
        if self._session is None:
            # Its own pool: the agent is the installation's, on an address no upstream may use.
            self._session = aiohttp.ClientSession(trust_env=False)
        try:
            async with asyncio.timeout(seconds):
                async with self._session.get(
                    self.url, headers=headers, allow_redirects=False
                ) as answer:
                    body = await answer.content.read(MAX_ANSWER_BYTES + 1)
                    status = answer.status
        except (TimeoutError, aiohttp.ClientError, OSError):
            raise ProxyError(
                "credential_failed", "EKS Pod Identity's agent did not answer in time"
            ) from None
        if status != 200:
            raise ProxyError(
                "credential_failed",
                f"EKS Pod Identity's agent answered {status} (is the proxies' service account "
                "associated with a role?)",
            )
        if len(body) > MAX_ANSWER_BYTES:
            raise ProxyError("credential_failed", "EKS Pod Identity's answer is over 16 KiB")
        return _held_of(body, time.time())

    async def _token(self) -> str:
        """The agent's token as the kubelet last wrote it."""
        assert self.token_file is not None
        try:
            raw = await asyncio.to_thread(_read_bounded, self.token_file)
        except OSError:
            raise ProxyError(
                "credential_failed", "EKS Pod Identity's token file cannot be read"
            ) from None
        token = raw.decode("ascii", "replace").strip()
        if not token or len(raw) > MAX_AGENT_TOKEN_BYTES or not token.isprintable():
            raise ProxyError(
                "credential_failed",
                "EKS Pod Identity's token file holds no token (empty, over 16 KiB, or not "
                "printable)",
            )
        return token


def _held_of(body: bytes, now: float) -> _Held:
    """The keys in the agent's answer, held until they are due; a ProxyError naming what is
    wrong."""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise ProxyError("credential_failed", "EKS Pod Identity's answer is not a JSON object")
    try:
        keys = AwsKeys(
            str(answer.get("AccessKeyId", "")),
            str(answer.get("SecretAccessKey", "")),
            str(answer.get("Token", "")),
        )
        AwsKeys.parse(keys.stored())  # held to what a stored key is held to
        expiration = datetime.fromisoformat(str(answer["Expiration"]))
    except AwsKeysError as error:
        raise ProxyError("credential_failed", f"EKS Pod Identity's keys: {error}") from None
    except (KeyError, ValueError):
        raise ProxyError(
            "credential_failed", "EKS Pod Identity's keys have no Expiration it can read"
        ) from None
    if expiration.tzinfo is None:
        expiration = expiration.replace(tzinfo=UTC)
    lifetime = expiration.timestamp() - now
    # Keys living less than the margin are used once, for the request that asked.
    return _Held(keys, time.monotonic() + max(0.0, lifetime - RENEW_BEFORE_SECONDS))


def _read_bounded(path: Path) -> bytes:
    with path.open("rb") as file:
        return file.read(MAX_AGENT_TOKEN_BYTES + 1)
