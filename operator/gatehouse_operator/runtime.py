"""What the operator's handlers share (kopf hands it to them as ``memo.runtime``): a plain bundle
of the controller's parts, assembled once by ``gatehouse_operator.wiring.controller``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gatehouse_contract.keyring import KeyringSource
from gatehouse_operator.api.meta import Kind
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.keys.credentials import CredentialEncrypter
from gatehouse_operator.keys.sealed_values import Resealer, SealingKeysSource
from gatehouse_operator.kube import Kube
from gatehouse_operator.settings import OperatorSettings
from gatehouse_operator.status import StatusWriter
from gatehouse_operator.table.channel import TableChannel
from gatehouse_operator.table.gather import Gatherer
from gatehouse_operator.table.journal import Journal
from gatehouse_operator.table.replicas import Replicas
from gatehouse_operator.table.rollout import Rollout
from gatehouse_operator.table.store import RouteStore


def kind_key(kind: Kind, resource: Resource) -> str:
    """namespace/Kind/name: how the table names an app, and the status writer a resource of a
    kind whose names may repeat another kind's in the namespace."""
    return f"{resource.namespace}/{kind.kind}/{resource.name}"


@dataclass
class Runtime:
    settings: OperatorSettings
    kube: Kube
    keyring: KeyringSource
    routes: RouteStore
    journal: Journal
    replicas: Replicas
    channel: TableChannel
    rollout: Rollout
    status: StatusWriter
    encrypter: CredentialEncrypter
    # The keys connections' auth.sealedSecret values are sealed to.
    sealing: SealingKeysSource
    # Those values resealed with the active sealing key, for the connections' status.
    resealer: Resealer
    # What apps did, asked of the proxy replicas on the channel.
    gatherer: Gatherer
    # ProjectConfigs by projectUuid (their uid), for the defaults API.
    projects: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Connections whose Secret a watch event said changed but that could not be read then:
    # read again soon (housekeeping), since the watch will not say it twice.
    unread: set[str] = field(default_factory=set)


def forget_resource(runtime: Runtime, key: str, uid: str = "") -> None:
    """Drops what the operator remembers of a resource that is gone."""
    runtime.status.forget(key)
    runtime.rollout.drop(key)
    runtime.encrypter.forget(uid)
    runtime.resealer.forget(uid)
