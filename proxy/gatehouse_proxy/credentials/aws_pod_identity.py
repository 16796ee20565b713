"""The Pod's own AWS keys from EKS Pod Identity's agent, which a role's keys are asked of STS
with (``AssumeRole``, chained: see :mod:`gatehouse_proxy.credentials.aws_roles`).

EKS gives a Pod whose service account is associated with a role two settings: the agent's URL
(``AWS_CONTAINER_CREDENTIALS_FULL_URI``, ``http://169.254.170.23/v1/credentials``) and a file
holding a token for it (``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE``, which the kubelet rotates:
read again at each ask). The agent answers the keys as JSON (``AccessKeyId``,
``SecretAccessKey``, ``Token``, ``Expiration``). They are the Pod's alone, so each worker keeps its
own, asked once for the requests that need them and again five minutes before they expire (an
hour at most); the role keys signed with them are what the fleet shares.

Where the agent is asked is the installation's: http only to the addresses AWS's SDKs allow for
it (EKS's and ECS's agents, loopback), anything else https. Its answer is read within bounds
(size, time) and never followed elsewhere. A service account token in a file, the agent's or a
web identity, is read by :func:`token_in_file`.
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
from gatehouse_proxy.http.bounded_reads import read_within

# What AWS's SDKs send a container credentials URL over http to (EKS Pod Identity's agent,
# ECS's, in IPv4 and IPv6); loopback is allowed too.
AGENT_ADDRESSES = frozenset(
    ipaddress.ip_address(address) for address in ("169.254.170.23", "169.254.170.2", "fd00:ec2::23")
)
# A service account token is about 1 KiB (the agent's, a web identity); the agent's answer is
# under 2 KiB.
MAX_TOKEN_FILE_BYTES = 16 * 1024
MAX_ANSWER_BYTES = 16 * 1024
# Asked again this long before the keys expire, and at least this often whatever the agent says
# (its keys live six hours).
RENEW_BEFORE_SECONDS = 300.0
MAX_HELD_SECONDS = 3600.0


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
    expire (an hour at most)."""

    def __init__(self, url: str, token_file: Path | None, timeout: float = 10.0) -> None:
        self.url = url
        self.token_file = token_file
        # The installation's bound for an ask, not the first waiter's: a connection's short
        # timeout must not fail the ask every other connection waits on.
        self.timeout = timeout
        self._held: _Held | None = None
        self._asking: asyncio.Task[_Held] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    async def keys(self, seconds: float) -> AwsKeys:
        """The Pod's keys, asked of the agent when none are held or they are due, waited for
        at most ``seconds``; a ProxyError ``credential_failed`` saying why not (never a
        value)."""
        held = self._held
        if held is not None and time.monotonic() < held.renew_at:
            return held.keys
        if self._closed:
            raise ProxyError("credential_failed", "the proxy is stopping")
        if self._asking is None:  # one ask for every request that comes while it is made
            self._asking = asyncio.create_task(self._ask(), name="eks-pod-identity")
            self._asking.add_done_callback(self._asked)
        try:
            async with asyncio.timeout(seconds):
                return (await asyncio.shield(self._asking)).keys
        except TimeoutError:
            raise ProxyError(
                "credential_failed", "EKS Pod Identity's agent did not answer in time"
            ) from None
        except asyncio.CancelledError:
            if not self._closed:
                raise  # this request's own cancellation
            raise ProxyError("credential_failed", "the proxy is stopping") from None

    def forget(self) -> None:
        """Drops the keys held (STS refused a request they signed): the next mint asks again."""
        self._held = None

    def _asked(self, task: asyncio.Task[_Held]) -> None:
        self._asking = None
        # Read here, so that an ask no request waited for to the end is no unread error.
        if not task.cancelled() and task.exception() is None:
            self._held = task.result()

    async def close(self) -> None:
        self._closed = True
        if self._asking is not None:
            self._asking.cancel()
        if self._session is not None:
            await self._session.close()

    async def _ask(self) -> _Held:
        token_file = self.token_file
        headers = (
            {"Authorization": await token_in_file(token_file, "EKS Pod Identity's")}
            if token_file
            else {}
        )
        if self._session is None:
            # Its own pool: the agent is the installation's, on an address no upstream may use.
            self._session = aiohttp.ClientSession(trust_env=False)
        try:
            async with asyncio.timeout(self.timeout):
                async with self._session.get(
                    self.url, headers=headers, allow_redirects=False
                ) as answer:
                    status = answer.status
                    body = await _read_answer(answer.content)
        except (TimeoutError, aiohttp.ClientError, OSError):
            raise ProxyError(
                "credential_failed",
                "EKS Pod Identity's agent could not be reached or did not answer in time",
            ) from None
        if status != 200:
            raise ProxyError(
                "credential_failed",
                f"EKS Pod Identity's agent answered {status} (is the proxies' service account "
                "associated with a role?)",
            )
        return _held_of(body, time.time())


async def _read_answer(content: aiohttp.StreamReader) -> bytes:
    """The whole answer (however it is split on the wire), refused past its bound."""
    body = await read_within(content.iter_chunked(MAX_ANSWER_BYTES), MAX_ANSWER_BYTES)
    if body is None:
        raise ProxyError("credential_failed", "EKS Pod Identity's answer is over 16 KiB")
    return body


def _held_of(body: bytes, now: float) -> _Held:
    """The keys in the agent's answer, held until they are due; a ProxyError naming what is
    wrong."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        answer = None
    if not isinstance(answer, dict):
        raise ProxyError("credential_failed", "EKS Pod Identity's answer is not a JSON object")
    fields = [answer.get(name) for name in ("AccessKeyId", "SecretAccessKey", "Token")]
    if not all(isinstance(field, str) for field in fields):
        raise ProxyError(
            "credential_failed",
            "EKS Pod Identity's answer lacks AccessKeyId, SecretAccessKey or Token as strings",
        )
    try:
        keys = AwsKeys(*(str(field) for field in fields))
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
    if lifetime <= 0:
        raise ProxyError(
            "credential_failed",
            "EKS Pod Identity's keys have expired already (check the proxy's clock)",
        )
    # Asked again five minutes before they expire, and at least hourly; keys living less than
    # that are used for the requests that waited on them alone.
    held = min(lifetime - RENEW_BEFORE_SECONDS, MAX_HELD_SECONDS)
    return _Held(keys, time.monotonic() + max(0.0, held))


async def token_in_file(path: Path, whose: str) -> str:
    """The service account token in ``path`` as the kubelet last wrote it (read again each time:
    it rotates); a ProxyError saying why not, ``whose`` naming it."""
    try:
        raw = await asyncio.to_thread(_read_bounded, path)
    except OSError:
        raise ProxyError("credential_failed", f"{whose} token file cannot be read") from None
    token = raw.decode("ascii", "replace").strip()
    if not token or len(raw) > MAX_TOKEN_FILE_BYTES or not token.isprintable():
        raise ProxyError(
            "credential_failed",
            f"{whose} token file holds no token (empty, over 16 KiB, or not printable)",
        )
    return token


def _read_bounded(path: Path) -> bytes:
    with path.open("rb") as file:
        return file.read(MAX_TOKEN_FILE_BYTES + 1)
