"""Webhook signing secrets in Secrets Manager (moto's in-process mock) and in memory: the port's contract."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.webhook_secrets.memory import MemoryWebhookSecrets
from jobrunner.adapters.webhook_secrets.secretsmanager import SecretsManagerWebhookSecrets
from jobrunner.domain.targets import WebhookSecret

if TYPE_CHECKING:
    from collections.abc import Iterator

    from jobrunner.adapters.webhook_secrets import Snapshot

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
PREFIX = "jobrunner/webhooks/"
NEW = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OLD = "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "eu-west-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="eu-west-1")


def test_a_tenant_without_a_secret_gets_one_created_and_kept(client: Any) -> None:
    clock = ManualClock(NOW)
    [secret] = SecretsManagerWebhookSecrets(PREFIX, client, clock).signing_secrets("alice")
    WebhookSecret.parse(secret)  # a whsec_ secret of a valid length
    [entry] = json.loads(client.get_secret_value(SecretId="jobrunner/webhooks/alice")["SecretString"])
    assert (entry["secret"], entry["created_at"]) == (secret, "2026-11-22T10:00:00.000Z")
    assert entry["id"].startswith("sec_")
    # and another process reads the same one
    assert SecretsManagerWebhookSecrets(PREFIX, client, clock).signing_secrets("alice") == [secret]


def test_during_a_rotation_both_secrets_are_returned_newest_first(client: Any) -> None:
    client.create_secret(Name="jobrunner/webhooks/alice", SecretString=json.dumps([
        {"id": "sec_1", "secret": OLD, "created_at": "2026-10-01T00:00:00.000Z"},
        {"id": "sec_2", "secret": NEW, "created_at": "2026-11-20T00:00:00.000Z"},
    ]))
    assert SecretsManagerWebhookSecrets(PREFIX, client, ManualClock(NOW)).signing_secrets("alice") == [NEW, OLD]


def test_secrets_are_read_again_once_the_cache_lapses(client: Any) -> None:
    client.create_secret(Name="jobrunner/webhooks/alice", SecretString=json.dumps([
        {"id": "sec_1", "secret": OLD, "created_at": "2026-10-01T00:00:00.000Z"}]))
    clock = ManualClock(NOW)
    secrets = SecretsManagerWebhookSecrets(PREFIX, client, clock, cache_s=60)
    assert secrets.signing_secrets("alice") == [OLD]
    client.put_secret_value(SecretId="jobrunner/webhooks/alice", SecretString=json.dumps([
        {"id": "sec_2", "secret": NEW, "created_at": "2026-11-22T09:59:00.000Z"},
        {"id": "sec_1", "secret": OLD, "created_at": "2026-10-01T00:00:00.000Z"}]))
    assert secrets.signing_secrets("alice") == [OLD]  # still cached
    clock.advance(timedelta(seconds=61))
    assert secrets.signing_secrets("alice") == [NEW, OLD]


def test_two_first_uses_racing_return_the_secret_created_first(client: Any) -> None:
    # Given the secret is created by another delivery between this one's read and its create
    created_by_other = SecretsManagerWebhookSecrets(PREFIX, client, ManualClock(NOW))
    secrets = SecretsManagerWebhookSecrets(PREFIX, client, ManualClock(NOW))
    original = secrets._load
    calls: list[list[str]] = []

    def read_then_race(user_id: str, *, fresh: bool) -> Snapshot | None:
        found = original(user_id, fresh=fresh)
        if not calls:
            calls.append(created_by_other.signing_secrets(user_id))
        return found

    secrets._load = read_then_race  # type: ignore[method-assign]
    assert secrets.signing_secrets("alice") == calls[0]


def test_fixed_secrets_are_a_tenants_first_ones_and_a_value_that_is_no_list_is_refused(client: Any) -> None:
    secrets = SecretsManagerWebhookSecrets(PREFIX, client, ManualClock(NOW), seeds={"bob": [NEW, OLD]})
    assert secrets.signing_secrets("bob") == [NEW, OLD]
    assert [s.text for s in SecretsManagerWebhookSecrets(PREFIX, client, ManualClock(NOW)).secrets_of("bob")] == [
        NEW, OLD]
    client.create_secret(Name="jobrunner/webhooks/carol", SecretString='{"secret": "whsec_x"}')
    with pytest.raises(ValueError, match="holds no list of signing secrets"):
        secrets.signing_secrets("carol")


def test_the_memory_twin_creates_one_secret_per_tenant_once() -> None:
    secrets = MemoryWebhookSecrets({"bob": [NEW, OLD]})
    assert secrets.signing_secrets("bob") == [NEW, OLD]
    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(secrets.signing_secrets("alice"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({tuple(r) for r in results}) == 1 and len(results[0]) == 1


def test_secrets_manager_out_of_reach_is_unavailable_and_its_message_holds_no_secret(
    client: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from botocore.exceptions import EndpointConnectionError

    from jobrunner.domain.errors import Unavailable

    secrets = SecretsManagerWebhookSecrets(PREFIX, client, ManualClock(NOW))
    [secret] = secrets.signing_secrets("alice")

    def unreachable(**arguments: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="https://secretsmanager.eu-west-1.amazonaws.com")

    monkeypatch.setattr(client, "put_secret_value", unreachable)
    with pytest.raises(Unavailable, match="EndpointConnectionError") as refused:
        secrets.rotate("alice", timedelta(hours=1))
    assert secret not in str(refused.value)
    assert secrets.secrets_of("alice")[0].text == secret  # nothing changed
