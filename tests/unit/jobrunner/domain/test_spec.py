"""A job's spec: declared once, checked by its own rules, digested as before, and carried whole by every edge.

The round trips fail when a field of ``JobSpec`` is missing from the API's models (``JobIn``, ``JobPatchIn``,
``JobOut``) or from the store's codec: ``FULL`` sets every field to a value that is not its default.
"""

from __future__ import annotations

import json
import re
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from jobrunner.adapters.stores import codec
from jobrunner.adapters.stores.cassandra import INSERT_JOB, UPDATE_JOB_SETTINGS, UPDATE_JOB_USER_FIELDS
from jobrunner.api.schemas import JobIn, JobOut, JobPatchIn
from jobrunner.domain.errors import InvalidField
from jobrunner.domain.jobs import Job
from jobrunner.domain.policies import CatchUp, Overlap
from jobrunner.domain.schedules import At, Cron, Every
from jobrunner.domain.spec import SPEC_FIELDS, JobSpec, RetryChange, RetryPolicy, SpecChange
from jobrunner.domain.targets import HttpsTarget, LambdaTarget

T0 = datetime(2026, 11, 22, 10, tzinfo=UTC)
#: Every field of the spec, each not its default (``test_full_sets_every_field`` keeps it so).
FULL = JobSpec(
    schedule=Cron("0 9 * * MON-FRI", timezone="Europe/Paris", start=T0), payload={"n": 1, "list": [1, "x"]},
    topic="reports", retry=RetryPolicy(3, 5.0, 3.0, 60.0), timeout_s=30, jitter_s=10, tags={"team": "payments"},
    calendar="holidays", delete_after_last=True, overlap=Overlap.SKIP, catch_up=CatchUp(window_s=3600, most=2),
    description="the payroll export, ask #payments",
)
#: A job delivered to a target has no topic: every field ``FULL`` leaves at its default is set here.
FULL_TARGET = replace(FULL, topic=None, target=HttpsTarget("https://hooks.example.com/run", "PUT",
                                                           {"Authorization": "Bearer t"}, 5))
LEAST = JobSpec(schedule=At(T0), payload=None)
#: Every field not at its default, in one of the full specs.
FULLS = [FULL, FULL_TARGET]
#: The API's names of the spec's fields that the API does not take as they are: the retries are two fields.
API_NAMES = {"retry": {"max_retries", "backoff"}}


def api_names(spec_fields: tuple[str, ...]) -> set[str]:
    return set().union(*(API_NAMES.get(name, {name}) for name in spec_fields))


def test_full_sets_every_field() -> None:
    unset = [f.name for f in fields(JobSpec) if all(getattr(full, f.name) == getattr(LEAST, f.name) for full in FULLS)]
    assert unset == [], "give FULL (or FULL_TARGET) a value other than the default for each new field"


@pytest.mark.parametrize("model", [JobIn, JobPatchIn, JobOut])
def test_every_field_of_the_spec_is_a_field_of_each_api_model(model: type[Any]) -> None:
    assert api_names(SPEC_FIELDS) - set(model.model_fields) == set()


@pytest.mark.parametrize("full", FULLS)
def test_every_field_the_codec_writes_is_read_back_on_each_write(full: JobSpec) -> None:
    # Given a job with every field of its spec set
    job = Job(user_id="alice", job_id="j1", spec=full, created_at=T0, updated_at=T0, version=2)
    # When it is inserted, or updated by either statement, and read back
    inserted = dict(zip(columns(INSERT_JOB), codec.job_values(job), strict=True))
    for statement, values in ((None, ()), (UPDATE_JOB_USER_FIELDS, codec.job_user_fields(job)),
                              (UPDATE_JOB_SETTINGS, codec.job_settings(job))):
        row = {**blank(), **inserted}
        if statement is not None:  # the columns an update sets, over a row that held the least spec
            least = Job(user_id="alice", job_id="j1", spec=replace(LEAST, topic="jobs"), created_at=T0, updated_at=T0)
            row = {**blank(), **dict(zip(columns(INSERT_JOB), codec.job_values(least), strict=True)),
                   **dict(zip(columns(statement), values, strict=True))}
            if statement is UPDATE_JOB_SETTINGS:
                row["schedule"] = inserted["schedule"]  # a change of settings keeps the schedule
        # Then the spec read is the spec written
        assert codec.job_from_row(SimpleNamespace(**row)).spec == full, statement


@pytest.mark.parametrize("full", FULLS)
def test_a_spec_goes_through_the_api_whole(full: JobSpec) -> None:
    # Given the body of a submit asking for every field, as an answer shows a job
    job = Job(user_id="alice", job_id="j1", spec=full, created_at=T0, updated_at=T0)
    shown = json.loads(JobOut.of(job).model_dump_json())
    body = {name: shown[name] for name in api_names(SPEC_FIELDS)}
    # When the API reads it, submitted or as a PATCH of the least job
    submitted = JobIn.model_validate(body).to_spec()
    patched = JobPatchIn.model_validate(body).to_change().applied_to(replace(LEAST, topic=full.topic))
    # Then both are the spec shown
    assert submitted == full
    assert patched == full


def test_a_patch_names_only_the_fields_it_holds_and_a_null_clears_only_where_it_means_none() -> None:
    change = JobPatchIn.model_validate({"payload": None, "timeout_s": None, "topic": None, "tags": None,
                                        "max_retries": 5}).to_change()
    assert sorted(change.named) == ["payload", "retry", "timeout_s"]
    spec = change.applied_to(FULL)
    assert (spec.payload, spec.timeout_s, spec.topic, spec.tags) == (None, None, "reports", {"team": "payments"})
    assert spec.retry == replace(FULL.retry, max_retries=5)


def test_a_change_names_only_fields_of_the_spec() -> None:
    with pytest.raises(TypeError, match="not a field of a job's spec: colour"):
        SpecChange(colour="blue")


def test_a_partial_retry_change_merges_with_the_retries_it_is_applied_to() -> None:
    spec = SpecChange(retry=RetryChange(initial_delay_s=1.0)).applied_to(FULL)
    assert spec.retry == RetryPolicy(3, 1.0, 3.0, 60.0)


@pytest.mark.parametrize(("changes", "path", "reason"), [
    ({"timeout_s": 0}, "timeout_s", "must be between 1 and 86400 seconds"),
    ({"jitter_s": 3601}, "jitter_s", "must be between 1 and 3600 seconds"),
    ({"tags": {"a:b": "x"}}, "tags.a:b", "a key is 1 to 64 letters, digits, '_', '.', '/' or '-'"),
    ({"catch_up": CatchUp(most=0)}, "catch_up.most", "must be between 1 and 1000 fires"),
    ({"retry": RetryPolicy(max_retries=21)}, "retry.max_retries", "must be between 0 and 20 retries"),
    ({"retry": RetryPolicy(multiplier=0.5)}, "retry.multiplier", "must be between 1 and 10 times"),
    ({"description": "x" * 1025}, "description", "must be at most 1024 characters"),
    ({"retry": RetryPolicy(initial_delay_s=0)}, "retry.initial_delay_s",
     "must be more than 0 and at most 86400 seconds"),
])
def test_a_spec_checks_its_own_rules_naming_the_field(changes: dict[str, Any], path: str, reason: str) -> None:
    with pytest.raises(InvalidField) as wrong:
        replace(FULL, **changes).checked()
    assert (wrong.value.field, wrong.value.reason) == (path, reason)


@pytest.mark.parametrize(("changes", "path", "reason"), [
    ({"target": HttpsTarget("http://hooks.example.com/")}, "target.https.url", "must be an https URL"),
    ({"target": LambdaTarget("arn:aws:lambda:eu-west-1:123:function:f")}, "target.lambda.function_arn",
     "must be a Lambda function ARN: arn:aws:lambda:<region>:<12-digit account>:function:<name>[:<version or alias>]"),
    ({"topic": "reports"}, "topic", "a job with a target has no topic: remove one of them"),
    ({"overlap": Overlap.CANCEL_OTHER}, "overlap",
     "cancel_other needs workers that cancel; a target's call cannot be cancelled"),
])
def test_a_job_with_a_target_keeps_the_target_rules(changes: dict[str, Any], path: str, reason: str) -> None:
    with pytest.raises(InvalidField) as wrong:
        replace(FULL_TARGET, **changes).checked()
    assert (wrong.value.field, wrong.value.reason) == (path, reason)


def test_a_change_that_gives_a_target_removes_the_topic_unless_it_names_one() -> None:
    # Given a job of a topic's workers
    assert FULL.topic == "reports"
    # When a change gives it a target: it has no topic any more
    moved = SpecChange(target=FULL_TARGET.target).applied_to(FULL)
    assert (moved.topic, moved.target) == (None, FULL_TARGET.target)
    # When a change gives both: they are exclusive
    with pytest.raises(InvalidField, match="topic"):
        SpecChange(target=FULL_TARGET.target, topic="reports").applied_to(FULL)
    # When a change names a topic for a job with a target, not removing it: the same
    with pytest.raises(InvalidField, match="topic"):
        SpecChange(topic="reports").applied_to(FULL_TARGET)
    # When a change removes the target and names a topic: the job is its topic's again
    back = SpecChange(target=None, topic="reports").applied_to(FULL_TARGET)
    assert (back.topic, back.target) == ("reports", None)
    # (removing it without naming one leaves no topic: the service gives the tenant's default)
    assert SpecChange(target=None).applied_to(FULL_TARGET).topic is None


def test_a_change_is_checked_by_the_same_rules() -> None:
    with pytest.raises(InvalidField, match="jitter_s"):
        SpecChange(jitter_s=0).applied_to(FULL)


@pytest.mark.parametrize(("spec", "digest"), [
    # The digests NewJob.fingerprint gave these requests: stored with idempotency keys, they must not change.
    (JobSpec(At(T0), {"n": 1}), "38a1c8cb7a2184cc205a069c82a705f0738393f19ef854e3b0c7dc91b590c73a"),
    (JobSpec(Every(timedelta(minutes=5), start=T0), {"n": 1}, topic="reports",
             retry=RetryPolicy(3, 5.0, 3.0, 60.0), timeout_s=30),
     "4b60db965939362e0eeb84e2eadd5a25e7f621bdd7375ace264472b8e50ce32e"),
    (JobSpec(Cron("0 9 * * MON-FRI", timezone="Europe/Paris"), [1, 2], topic="jobs", jitter_s=10,
             tags={"team": "payments"}, calendar="holidays", delete_after_last=True, overlap=Overlap.SKIP,
             catch_up=CatchUp(window_s=3600, most=2)),
     "d67ea5bfd8eeba29482148ac425c4b33e225f235e06e98bdba9d0f2973f8982b"),
])
def test_a_digest_is_the_one_the_same_request_had_before_the_spec(spec: JobSpec, digest: str) -> None:
    assert spec.digest() == digest


def test_each_field_changes_the_digest() -> None:
    values = {f.name: getattr(FULL, f.name) for f in fields(JobSpec)} | {"target": FULL_TARGET.target}
    digests = {replace(LEAST, **{name: value}).digest() for name, value in values.items()}
    assert len(digests | {LEAST.digest()}) == len(SPEC_FIELDS) + 1


def columns(statement: str) -> list[str]:
    """The columns a statement binds, in order (an INSERT's list, or an UPDATE's SET)."""
    if statement.startswith("INSERT"):
        return [c.strip() for c in statement.split("(", 1)[1].split(")", 1)[0].split(",")]
    return re.findall(r"(\w+) = \?", statement.split(" WHERE ")[0])


def blank() -> dict[str, Any]:
    """The columns a row read has that no job write binds (the scan's own)."""
    return {"scan_schedule_version": None, "scan_next_run_at": None}
