"""ProjectConfig: validate and compile ``service.config.yml``; publish the result and warnings.

Conditions: ``Compiled`` (the file is valid; False with ``InvalidConfig`` naming the path and the
rule, for what the CRD schema could not check or a config the admission webhook did not see) and
``Ready``. Every compile warning is listed in status and sent as a Warning Event once per
generation, after the status is written, so ``kubectl describe`` shows them and a retried write
does not repeat them.
"""

from __future__ import annotations

from typing import Any, cast

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
from gatehouse_operator.project_config.compiler import compile_config
from gatehouse_operator.project_config.schema import parsed_spec
from gatehouse_operator.runtime import Runtime, forget_resource
from gatehouse_operator.status import Verdict, ready

PLURAL = PROJECT_CONFIG.plural


def _key(body: dict[str, Any]) -> str:
    return f"{body['metadata']['namespace']}/{PROJECT_CONFIG.kind}/{body['metadata']['name']}"


async def reconcile(runtime: Runtime, body: dict[str, Any]) -> None:
    key = _key(body)
    meta = body["metadata"]
    runtime.projects[meta["uid"]] = (meta["namespace"], meta["name"])
    spec = body["spec"]
    config, problems = parsed_spec(spec)
    if config is None:
        verdict = Verdict(
            ConditionType.COMPILED, "False", Reason.INVALID_CONFIG, "; ".join(problems)
        )
        fields = ProjectConfigStatus(project_uuid=meta["uid"])
        await runtime.status.write(
            PROJECT_CONFIG, body, [verdict, ready([verdict], "", "")], fields, key
        )
        return
    compiled = compile_config(config)
    warnings = fitted_warnings(compiled.warnings)
    summary = (
        f"compiled with {len(compiled.warnings)} warning(s)"
        if compiled.warnings
        else "compiled without warnings"
    )
    verdict = Verdict(ConditionType.COMPILED, "True", Reason.COMPILED, summary)
    fields = ProjectConfigStatus(
        project_uuid=meta["uid"],
        warnings=[
            CompileWarningStatus(rule=w.rule, path=w.path, message=w.message) for w in warnings
        ],
        compiled=CompiledConfig.model_validate(compiled.as_status()),
    )
    first_time = body.get("status", {}).get("observedGeneration") != meta.get("generation", 0)
    await runtime.status.write(
        PROJECT_CONFIG, body, [verdict, ready([verdict], "Compiled", summary)], fields, key
    )
    if first_time:
        subject = cast(kopf.Body, body)
        for warning in warnings:
            kopf.warn(subject, reason=warning.rule, message=warning.message)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
async def project_config_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await reconcile(memo.runtime, dict(body))


# On the watch: an on.delete handler is called only for objects that carry a finalizer.
@kopf.on.event(GROUP, VERSION, PLURAL)
async def project_config_event(
    event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    if event.get("type") != "DELETED":
        return
    runtime: Runtime = memo.runtime
    forget_resource(runtime, _key(dict(body)))
    runtime.projects.pop(body["metadata"]["uid"], None)
