"""The operator's metrics: each resource's readiness, the build, and the process."""

from __future__ import annotations

from prometheus_client.exposition import generate_latest

from gatehouse_contract.observability import version
from gatehouse_operator.runtime import Runtime, forget_resource
from gatehouse_operator.table import metrics
from tests.operator.test_credential_watch import SecretsApi, reconciled


def _exposed(runtime: Runtime) -> str:
    found = metrics.registry(
        runtime.journal, runtime.replicas, runtime.rollout, runtime.status, runtime.channel.dropped
    )
    return generate_latest(found).decode()


def test_each_resource_has_a_series_with_its_ready_status_and_loses_it_when_gone() -> None:
    runtime = reconciled(SecretsApi(None, False, status=403))  # not Ready: its Secret is refused
    exposed = _exposed(runtime)
    series = 'gatehouse_operator_resource_ready{kind="ExternalConnection",name="vendor",'
    assert series + 'namespace="shop",status="False"} 1.0' in exposed
    assert exposed.count("gatehouse_operator_resource_ready{") == 1  # one series a resource

    forget_resource(runtime, "shop/vendor")
    assert "gatehouse_operator_resource_ready{" not in _exposed(runtime)


def test_the_build_and_the_process_are_exposed() -> None:
    exposed = _exposed(reconciled(SecretsApi(None, False, status=403)))
    assert 'gatehouse_operator_build_info{python_version="' in exposed
    assert f'version="{version()}"}} 1.0' in exposed
    for default in ("process_resident_memory_bytes", "python_info", "python_gc_objects_collected"):
        assert default in exposed
