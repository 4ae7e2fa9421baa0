"""Result tokens (domain.receipts): one execution's, under one key."""

from __future__ import annotations

from jobrunner.domain.receipts import result_token, token_fits

KEY = b"k" * 32


def test_a_token_is_the_same_for_one_execution_and_key_and_differs_otherwise() -> None:
    token = result_token(KEY, "e-1")
    assert token == result_token(KEY, "e-1")
    assert len(token) == 43 and "=" not in token
    assert token != result_token(KEY, "e-2")
    assert token != result_token(b"other key", "e-1")


def test_only_the_executions_own_token_fits() -> None:
    assert token_fits(KEY, "e-1", result_token(KEY, "e-1"))
    assert not token_fits(KEY, "e-1", result_token(KEY, "e-2"))  # another execution's (a tenant's own, say)
    assert not token_fits(KEY, "e-1", result_token(b"guessed", "e-1"))
    assert not token_fits(KEY, "e-1", None)
    assert not token_fits(KEY, "e-1", "")
    assert not token_fits(KEY, "e-1", result_token(KEY, "e-1")[:-1])
