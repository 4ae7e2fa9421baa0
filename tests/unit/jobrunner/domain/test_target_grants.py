"""A stage's rules for targets: the kinds it allows, and the functions and queues on its allow-lists."""

from __future__ import annotations

import pytest

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.target_grants import TargetGrants, check_allow_entry, kind_of
from jobrunner.domain.targets import HttpsTarget, LambdaTarget, SqsTarget, Target

FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:export"
QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/work"
HOOK = HttpsTarget("https://hooks.example.com/run")


@pytest.mark.parametrize(("target", "kind"), [
    (HOOK, "https"), (LambdaTarget(FUNCTION), "lambda"), (SqsTarget(QUEUE), "sqs"),
])
def test_a_target_kind_is_the_key_of_its_shape(target: Target, kind: str) -> None:
    assert kind_of(target) == kind == next(iter(target.to_dict()))


def test_by_default_every_kind_is_allowed_but_no_function_nor_queue() -> None:
    grants = TargetGrants()
    assert grants.refusal(HOOK) is None
    assert grants.refusal(LambdaTarget(FUNCTION)) == ("target.lambda.function_arn is not a function this "
                                                      "deployment may invoke (its allow-list)")
    assert grants.refusal(SqsTarget(QUEUE)) == ("target.sqs.queue_url is not a queue this deployment may send to "
                                                "(its allow-list)")


def test_a_kind_the_stage_does_not_allow_is_a_wrong_target() -> None:
    with pytest.raises(InvalidField) as wrong:
        TargetGrants(kinds=frozenset({"lambda", "sqs"}), lambda_allow=("*",)).check(HOOK, "jobs.2.target")
    assert (wrong.value.field, wrong.value.reason) == ("jobs.2.target",
                                                       "https targets are not allowed here; allowed: lambda, sqs")
    assert TargetGrants(kinds=frozenset()).refusal(HOOK) == "target https targets are not allowed here; allowed: none"


@pytest.mark.parametrize(("entries", "arn", "allowed"), [
    (("*",), FUNCTION, True),
    (("123456789012",), FUNCTION, True),
    (("123456789012",), "arn:aws:lambda:us-east-1:123456789012:function:other:prod", True),
    (("210987654321",), FUNCTION, False),
    ((FUNCTION,), FUNCTION, True),
    ((FUNCTION,), FUNCTION + ":prod", True),  # an unqualified ARN allows the function's versions and aliases
    ((FUNCTION + ":prod",), FUNCTION, False),  # an alias allows that alias only
    ((FUNCTION + ":prod",), FUNCTION + ":prod", True),
    ((FUNCTION,), FUNCTION + "2", False),
])
def test_a_function_is_allowed_by_any_its_account_or_its_arn(entries: tuple[str, ...], arn: str,
                                                             allowed: bool) -> None:
    assert (TargetGrants(lambda_allow=entries).refusal(LambdaTarget(arn)) is None) is allowed


@pytest.mark.parametrize(("entries", "url", "allowed"), [
    (("*",), QUEUE, True),
    (("123456789012",), QUEUE, True),
    ((QUEUE,), QUEUE, True),
    ((QUEUE,), QUEUE + "2", False),
    (("210987654321",), QUEUE, False),
])
def test_a_queue_is_allowed_by_any_its_account_or_its_url(entries: tuple[str, ...], url: str, allowed: bool) -> None:
    assert (TargetGrants(sqs_allow=entries).refusal(SqsTarget(url)) is None) is allowed


@pytest.mark.parametrize(("entry", "kind"), [
    ("*", "lambda"), ("123456789012", "sqs"), (FUNCTION, "lambda"), (FUNCTION + ":7", "lambda"), (QUEUE, "sqs"),
    (QUEUE + ".fifo", "sqs"),
])
def test_an_allow_list_entry_is_any_an_account_or_a_name(entry: str, kind: str) -> None:
    assert check_allow_entry(entry, kind) == entry


@pytest.mark.parametrize(("entry", "kind", "reason"), [
    ("12345", "lambda", "'12345' is neither *, a 12-digit account id nor a function ARN"),
    (QUEUE, "lambda", f"{QUEUE!r} is neither *, a 12-digit account id nor a function ARN"),
    (FUNCTION, "sqs", f"{FUNCTION!r} is neither *, a 12-digit account id nor a queue URL"),
])
def test_a_wrong_allow_list_entry_is_refused(entry: str, kind: str, reason: str) -> None:
    with pytest.raises(ValueError, match="neither") as wrong:
        check_allow_entry(entry, kind)
    assert str(wrong.value) == reason
