"""Where the result key comes from (adapters.secrets)."""

from __future__ import annotations

from typing import Any

import pytest

from jobrunner.adapters.secrets import MissingResultKey, result_key
from jobrunner.config import Settings


class FakeSecrets:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def get_secret_value(self, SecretId: str) -> dict[str, Any]:
        self.asked.append(SecretId)
        return {"SecretString": "from-the-secret"}


def test_the_key_itself_wins_then_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    secrets = FakeSecrets()
    both = Settings.from_env({"JOBRUNNER_RESULT_KEY": "direct", "JOBRUNNER_RESULT_KEY_SECRET_ARN": "arn:secret"})
    assert result_key(both, secrets) == b"direct" and secrets.asked == []
    from_secret = Settings.from_env({"JOBRUNNER_RESULT_KEY_SECRET_ARN": "arn:secret"})
    assert result_key(from_secret, secrets) == b"from-the-secret"
    assert secrets.asked == ["arn:secret"]


def test_locally_without_a_key_every_process_of_one_keyspace_derives_the_same_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    one = result_key(Settings.from_env({"CASSANDRA_KEYSPACE": "ks_a"}))
    assert one == result_key(Settings.from_env({"CASSANDRA_KEYSPACE": "ks_a"}))
    assert one != result_key(Settings.from_env({"CASSANDRA_KEYSPACE": "ks_b"}))


def test_in_lambda_without_a_key_the_function_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "jobrunner-results")
    with pytest.raises(MissingResultKey):
        result_key(Settings.from_env({}))
