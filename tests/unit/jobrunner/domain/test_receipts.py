"""Result tokens (domain.receipts): one attempt of one execution of one tenant, under one key."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import TypedDict

import pytest

from jobrunner.domain.receipts import result_token, token_fits, v1_result_token, v1_token_fits

KEY = b"k" * 32


class Execution(TypedDict):
    tenant: str
    execution_id: str
    attempt: int


EXECUTION: Execution = {"tenant": "alice", "execution_id": "e-1", "attempt": 1}


def test_a_token_is_the_same_for_one_execution_and_key_and_differs_otherwise() -> None:
    token = result_token(KEY, **EXECUTION)
    assert token == result_token(KEY, tenant="alice", execution_id="e-1", attempt=1)
    assert len(token) == 43 and "=" not in token
    assert token != result_token(KEY, tenant="alice", execution_id="e-2", attempt=1)
    assert token != result_token(b"other key", **EXECUTION)


def test_only_the_executions_own_token_fits() -> None:
    assert token_fits(KEY, result_token(KEY, **EXECUTION), **EXECUTION)
    # another execution's (a tenant's own, say)
    assert not token_fits(KEY, result_token(KEY, tenant="alice", execution_id="e-2", attempt=1), **EXECUTION)
    assert not token_fits(KEY, result_token(b"guessed", **EXECUTION), **EXECUTION)
    assert not token_fits(KEY, None, **EXECUTION)
    assert not token_fits(KEY, "", **EXECUTION)
    assert not token_fits(KEY, result_token(KEY, **EXECUTION)[:-1], **EXECUTION)


def test_the_token_of_one_attempt_does_not_fit_another() -> None:
    # Given the token of attempt 1 of an execution
    token = result_token(KEY, tenant="alice", execution_id="e-1", attempt=1)
    # Then it fits attempt 1 only, not attempt 2 of the same execution id
    assert token_fits(KEY, token, tenant="alice", execution_id="e-1", attempt=1)
    assert not token_fits(KEY, token, tenant="alice", execution_id="e-1", attempt=2)


def test_the_token_of_one_tenant_does_not_fit_the_same_execution_of_another() -> None:
    # Given a token computed for tenant A
    token = result_token(KEY, tenant="tenant-a", execution_id="e-1", attempt=1)
    # Then the same execution id stored under tenant B does not take it
    assert not token_fits(KEY, token, tenant="tenant-b", execution_id="e-1", attempt=1)


@pytest.mark.parametrize(("one", "other"), [
    (("ab", "c", 1), ("a", "bc", 1)),  # a boundary moved between tenant and execution id
    (("a", "b1", 1), ("a", "b", 11)),  # ... between execution id and attempt
    (("a", "", 1), ("", "a", 1)),
], ids=["tenant|execution", "execution|attempt", "empty"])
def test_fields_are_signed_so_that_moving_a_boundary_between_them_changes_the_token(
    one: tuple[str, str, int], other: tuple[str, str, int],
) -> None:
    tenant, execution_id, attempt = one
    token = result_token(KEY, tenant=tenant, execution_id=execution_id, attempt=attempt)
    tenant, execution_id, attempt = other
    assert not token_fits(KEY, token, tenant=tenant, execution_id=execution_id, attempt=attempt)


def test_a_first_scheme_token_is_never_taken_for_a_second_scheme_one() -> None:
    # Given the token the first scheme gave execution e-1 (an HMAC of its id alone)
    v1 = v1_result_token(KEY, "e-1")
    digest = hmac.new(KEY, b"jobrunner-result-token-v1:e-1", hashlib.sha256).digest()
    assert v1 == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()  # what older scans sent
    # Then it fits e-1 under the first scheme only
    assert v1_token_fits(KEY, v1, execution_id="e-1")
    assert not v1_token_fits(KEY, v1, execution_id="e-2")
    assert not token_fits(KEY, v1, **EXECUTION)
    # and a second scheme token is no first scheme one
    assert not v1_token_fits(KEY, result_token(KEY, **EXECUTION), execution_id="e-1")


@pytest.mark.parametrize("token", ["é" * 43, "\ud800" * 43, "x" * 43], ids=["non-ascii", "surrogate", "ascii"])
def test_a_token_that_cannot_be_one_is_refused_not_raised(token: str) -> None:
    assert not token_fits(KEY, token, **EXECUTION)
    assert not v1_token_fits(KEY, token, execution_id="e-1")
