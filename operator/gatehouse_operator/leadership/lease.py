"""Leader election for the controller: a ``coordination.k8s.io`` Lease, as Kubernetes' own
controllers hold one.

Every controller replica races for the Lease. The holder runs kopf (reconciles, encrypts, serves the
table channel, the service API and the page); the others wait, started and connected, and one of
them takes over when the holder goes. kopf's peering is no use here: replicas of one Deployment
share a priority, and two operators of the same priority both freeze.

- Timings are kube-controller-manager's: a lease of 15 s, renewed every 2 s, given up when no
  renewal has succeeded for 10 s.
- Expiry is judged by this process's own clock: a record seen unchanged for the lease's duration
  (as client-go does), never by comparing times that another node's clock wrote.
- A leader that stops (SIGTERM: a rollout, a drain, a deleted Pod) releases the Lease, so a
  standby takes over within a retry period, not a lease duration.
- A leader that cannot renew by the deadline (a frozen process, a network partition, the API
  server away) must stop acting before anyone else may start: the caller exits at once. Its
  container restarts as a standby; holding the same identity (the Pod's name), it takes the Lease
  straight back if no one else took it meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from dataclasses import dataclass

from kubernetes.aio import client

from gatehouse_operator.kube import API_ERRORS, failure
from gatehouse_operator.kube.errors import Conflict, NotFound, translate

log = logging.getLogger("gatehouse.leadership")
# The longest a label call may take.
CALL_SECONDS = 5.0


@dataclass(frozen=True)
class Timings:
    lease_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_seconds: float = 2.0


class Leadership:
    def __init__(
        self,
        coordination: client.CoordinationV1Api,
        namespace: str,
        name: str,
        identity: str,
        timings: Timings = Timings(),
    ) -> None:
        self.coordination = translate(coordination)  # its refusals: kube.errors'
        self.namespace, self.name, self.identity = namespace, name, identity
        self.timings = timings
        self.renewed_at = 0.0  # monotonic; 0: never held
        self.released = False  # given up on purpose: keep() ends without calling it lost
        self._observed = ""  # the Lease's resourceVersion as last seen
        self._observed_at = 0.0
        self._holder = ""  # who held it when last seen

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def holding(self) -> bool:
        """Whether this process holds the Lease now (renewed within the deadline)."""
        return bool(self.renewed_at) and (
            time.monotonic() - self.renewed_at < self.timings.renew_deadline_seconds
        )

    async def acquire(self) -> None:
        """Returns once this process holds the Lease."""
        waiting_for = ""
        while not await self._take():
            if self._holder != waiting_for:
                log.info("standing by: %s leads (Lease %s)", self._holder or "no one", self.ref)
                waiting_for = self._holder
            await asyncio.sleep(self.timings.retry_seconds)
        log.info("leading (Lease %s)", self.ref)

    async def keep(self) -> None:
        """Renews the Lease; returns the moment a renewal has not succeeded within the deadline.

        The deadline is checked before every call (a process that froze wakes up past it and
        must not make one more round trip first) and no call may outlast it.
        """
        while True:
            await asyncio.sleep(max(0.0, min(self.timings.retry_seconds, self._left())))
            if self.released:
                return
            left = self._left()
            if left > 0 and await self._take(within=min(self.timings.retry_seconds * 2, left)):
                continue
            if not self.holding():
                log.error(
                    "lost the Lease %s: no renewal for %.0fs",
                    self.ref,
                    self.timings.renew_deadline_seconds,
                )
                return

    def _left(self) -> float:
        """Seconds until the renew deadline."""
        return self.renewed_at + self.timings.renew_deadline_seconds - time.monotonic()

    async def release(self) -> None:
        """Gives the Lease up, if held, so that a standby need not wait for it to expire."""
        if self.released:
            return
        self.released, self.renewed_at = True, 0.0
        try:
            await asyncio.wait_for(self._give_up(), self.timings.retry_seconds * 2)
        except API_ERRORS as error:
            log.warning("cannot release the Lease %s (%s)", self.ref, failure(error))

    async def _give_up(self) -> None:
        lease = await self.coordination.read_namespaced_lease(self.name, self.namespace)
        if lease.spec is None or lease.spec.holder_identity != self.identity:
            return
        lease.spec.holder_identity = None
        lease.spec.lease_duration_seconds = 1
        lease.spec.renew_time = _now()
        await self.coordination.replace_namespaced_lease(self.name, self.namespace, lease)
        log.info("released the Lease %s", self.ref)

    async def _take(self, within: float = 0.0) -> bool:
        """One attempt to acquire or renew; True when this process holds the Lease after it.

        Bounded in time (by default two retry periods): an API server that hangs rather than
        refuses (frozen, or a partition that drops packets) must count as a failed renewal, or a
        leader would never notice its deadline pass.
        """
        try:
            return await asyncio.wait_for(
                self._try_take(), within or self.timings.retry_seconds * 2
            )
        except API_ERRORS as error:
            if not isinstance(error, Conflict):
                log.warning("cannot read or write the Lease %s (%s)", self.ref, failure(error))
            return False  # 409: another replica wrote it first

    async def _try_take(self) -> bool:
        # The deadline counts from before the write: the Lease is ours from when it was sent.
        started, now = time.monotonic(), _now()
        try:
            lease = await self.coordination.read_namespaced_lease(self.name, self.namespace)
        except NotFound:
            spec = client.V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=int(self.timings.lease_seconds),
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            )
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace), spec=spec
            )
            created = await self.coordination.create_namespaced_lease(self.namespace, body)
            self._seen(created)
            self.renewed_at = started
            return True
        self._seen(lease)
        spec = lease.spec or client.V1LeaseSpec()
        holder = spec.holder_identity or ""
        ours = holder == self.identity
        duration = spec.lease_duration_seconds or self.timings.lease_seconds
        expired = time.monotonic() - self._observed_at >= duration
        if not ours and holder and not expired:
            return False
        spec.holder_identity = self.identity
        spec.lease_duration_seconds = int(self.timings.lease_seconds)
        spec.renew_time = now
        if not ours:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        lease.spec = spec
        # The resourceVersion read above makes this a compare-and-swap: of two replicas that
        # both saw the Lease free, one write fails with 409.
        replaced = await self.coordination.replace_namespaced_lease(
            self.name, self.namespace, lease
        )
        self._seen(replaced)
        self.renewed_at = started
        return True

    def _seen(self, lease: client.V1Lease) -> None:
        self._holder = str(lease.spec.holder_identity or "") if lease.spec else ""
        version = str(lease.metadata.resource_version if lease.metadata else "")
        if version != self._observed:
            self._observed, self._observed_at = version, time.monotonic()


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class LeaderLabel:
    """The label that puts the leader's Pod, and no other, behind the operator's Service.

    Readiness cannot do it: a standby that never became ready would stall every rollout and
    ``helm --wait``. The value is the Lease's name, so releases sharing a namespace keep apart.
    Outside a Pod (no POD_NAME) there is nothing to label.
    """

    KEY = "gatehouse.dev/leader"

    def __init__(self, core: client.CoreV1Api, namespace: str, lease: str, pod: str) -> None:
        self.core, self.namespace, self.lease, self.pod = translate(core), namespace, lease, pod

    async def clear_own(self) -> None:
        """Takes the label off this Pod: a restarted container of a leader starts as a standby.
        Bounded: an API server that hangs must not keep a standby from standing by."""
        if self.pod:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._set(self.pod, None), CALL_SECONDS)

    async def mark(self) -> None:
        """Labels this Pod, and takes the label off any other that still has it."""
        if not self.pod:
            return
        await self._set(self.pod, self.lease)
        try:
            pods = await self.core.list_namespaced_pod(
                self.namespace, label_selector=f"{self.KEY}={self.lease}"
            )
        except API_ERRORS as error:
            log.warning("cannot list the Pods labelled %s (%s)", self.KEY, failure(error))
            return
        for pod in pods.items:
            if pod.metadata and pod.metadata.name != self.pod:
                await self._set(str(pod.metadata.name), None)

    async def _set(self, pod: str, value: str | None) -> None:
        patch = {"metadata": {"labels": {self.KEY: value}}}
        try:
            await self.core.patch_namespaced_pod(
                pod, self.namespace, patch, _content_type="application/merge-patch+json"
            )
        except API_ERRORS as error:
            # Said, not fatal: the Service may point at the wrong Pod until the next leader
            # change, and the proxies, keeping their last table, say so in their readiness.
            log.error("cannot label Pod %s %s=%s (%s)", pod, self.KEY, value, failure(error))
