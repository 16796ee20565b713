"""What a waiting caller reads of a stored ConnectionTest: its outcome once finished, whether it
may be saved as a sample, and the operator's answer to a request to save it."""

from __future__ import annotations

from typing import Any

from gatehouse_operator.api.connection_test import SAVE_AS_SAMPLE_ANNOTATION
from gatehouse_operator.api.stored import StoredConnectionTest
from gatehouse_operator.connections import runs
from gatehouse_operator.connections.models import SampleSaveOutcome

RESPONSE = {"statusCode": 200, "contentType": "application/json", "body": "{}"}


def _test(status: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "crm-1a2b3c4d", "namespace": "team"}
    if annotations is not None:
        metadata["annotations"] = annotations
    spec = {"connection": "crm", "method": "GET", "path": "/"}
    return {"metadata": metadata, "spec": spec, "status": status}


def _passed(**more: Any) -> dict[str, Any]:
    condition = {"type": "Passed", "status": "True", "reason": "Ok", "message": "HTTP 200"}
    return {"finishedAt": "2026-01-01T00:00:00Z", "conditions": [condition], **more}


def test_a_running_test_has_no_outcome_and_cannot_be_saved() -> None:
    running = _test({"conditions": [{"type": "Passed", "status": "Unknown"}]})
    assert runs.outcome(StoredConnectionTest.of(running)) is None
    refused = runs.save_request(StoredConnectionTest.of(running), "")
    assert refused is not None
    assert (refused.saved, refused.reason) == (False, "NotFinished")


def test_a_finished_test_has_its_outcome() -> None:
    found = _test(_passed(response=RESPONSE, sampleBody={}))
    done = runs.outcome(StoredConnectionTest.of(found))
    assert done is not None
    assert done.model_dump() == {
        "name": "crm-1a2b3c4d",
        "passed": True,
        "reason": "Ok",
        "message": "HTTP 200",
        "response": RESPONSE,
        "sample": "",
    }
    assert runs.save_request(StoredConnectionTest.of(found), "first") is None


def test_a_finished_test_without_conditions_did_not_pass() -> None:
    done = runs.outcome(StoredConnectionTest.of(_test({"finishedAt": "2026-01-01T00:00:00Z"})))
    assert done is not None
    assert (done.passed, done.reason, done.message, done.response) == (False, "", "", None)


def test_a_saved_test_is_not_saved_again() -> None:
    refused = runs.save_request(
        StoredConnectionTest.of(_test(_passed(sample="crm-1a2b3c4d", sampleBody={}))), ""
    )
    assert refused is not None
    assert refused.reason == "AlreadySaved"


def test_the_answer_to_a_save_comes_once_the_annotation_is_gone() -> None:
    asked = _test(_passed(sampleBody={}), {SAVE_AS_SAMPLE_ANNOTATION: "first"})
    assert runs.saved(StoredConnectionTest.of(asked)) is None
    no = {"type": "SampleSaved", "status": "False", "reason": "SaveError", "message": "again"}
    refused = _test(_passed(sampleBody={}, conditions=[no]), {})
    assert runs.saved(StoredConnectionTest.of(refused)) == SampleSaveOutcome(
        saved=False, sample="", reason="SaveError", message="again"
    )
    done = _test(_passed(sampleBody={}, sample="crm-1a2b3c4d"))
    answer = runs.saved(StoredConnectionTest.of(done))
    assert answer is not None
    assert (answer.saved, answer.sample, answer.reason) == (True, "crm-1a2b3c4d", "")
