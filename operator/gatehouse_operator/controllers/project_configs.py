"""ProjectConfig: validate and compile ``service.config.yml``; publish the result and warnings.

Conditions: ``Compiled`` (the file is valid; False with ``InvalidConfig`` naming the path and the
rule, for what the CRD schema could not check or a config the admission webhook did not see) and
``Ready``. Every compile warning is listed in status and sent as a Warning Event once per
generation, after the status is written, so ``kubectl describe`` shows them and a retried write
does not repeat them. The handler sends them: kopf's Events are posted on kopf's own body.
"""

from __future__ import annotations

from typing import Any

import kopf

from gatehouse_operator.api.conditions import ConditionType, Reason
from gatehouse_operator.api.meta import GROUP, VERSION
from gatehouse_operator.api.project_config import (
    PROJECT_CONFIG,
    CompiledConfig,
    CompileWarningStatus,
    ProjectConfigStatus,
    fitted_warnings,
)
from gatehouse_operator.api.resource import Resource
from gatehouse_operator.kube.objects import resource_of
from gatehouse_operator.project_config.compiler import compile_config
from gatehouse_operator.project_config.schema import parsed_spec
from gatehouse_operator.project_config.time_intervals import CompileWarning
from gatehouse_operator.runtime import Runtime, forget_resource, kind_key
from gatehouse_operator.status import Verdict, ready

PLURAL = PROJECT_CONFIG.plural


async def reconcile(runtime: Runtime, project: Resource) -> list[CompileWarning]:
    """Compiles and writes the status; the warnings to send as Events (none unless this
    generation was not compiled before)."""
    key = kind_key(PROJECT_CONFIG, project)
    runtime.projects[project.uid] = (project.namespace, project.name)
    config, problems = parsed_spec(project.spec)
    if config is None:
        verdict = Verdict(
            ConditionType.COMPILED, "False", Reason.INVALID_CONFIG, "; ".join(problems)
        )
        fields = ProjectConfigStatus(project_uuid=project.uid)
        await runtime.status.write(
            PROJECT_CONFIG, project, [verdict, ready([verdict], "", "")], fields, key
        )
        return []
    compiled = compile_config(config)
    warnings = fitted_warnings(compiled.warnings)
    summary = (
        f"compiled with {len(compiled.warnings)} warning(s)"
        if compiled.warnings
        else "compiled without warnings"
    )
    verdict = Verdict(ConditionType.COMPILED, "True", Reason.COMPILED, summary)
    fields = ProjectConfigStatus(
        project_uuid=project.uid,
        warnings=[
            CompileWarningStatus(rule=w.rule, path=w.path, message=w.message) for w in warnings
        ],
        compiled=CompiledConfig.of(compiled),
    )
    first_time = project.status.get("observedGeneration") != project.generation
    await runtime.status.write(
        PROJECT_CONFIG, project, [verdict, ready([verdict], "Compiled", summary)], fields, key
    )
    return warnings if first_time else []


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
async def project_config_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    for warning in await reconcile(memo.runtime, resource_of(body)):
        kopf.warn(body, reason=warning.rule, message=warning.message)


# On the watch: an on.delete handler is called only for objects that carry a finalizer.
@kopf.on.event(GROUP, VERSION, PLURAL)
async def project_config_event(
    event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    if event.get("type") != "DELETED":
        return
    runtime: Runtime = memo.runtime
    project = resource_of(body)
    forget_resource(runtime, kind_key(PROJECT_CONFIG, project))
    runtime.projects.pop(project.uid, None)
