"""The WebhookSecrets contract, on memory and on Secrets Manager (moto's in-process mock)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.targets import DEFAULT_GRACE, MAX_GRACE, WebhookSecret

if TYPE_CHECKING:
    from jobrunner.adapters.webhook_secrets import KeptWebhookSecrets, Snapshot
    from jobrunner.domain.targets import SigningSecret
    from tests.contract.conftest import SecretStores


def read_once(monkeypatch: pytest.MonkeyPatch, store: KeptWebhookSecrets, stale: Snapshot | None) -> None:
    """``store``'s next read finds ``stale`` (as if it read before another write landed); later ones are real."""
    real = store._load
    reads: list[bool] = []

    def load(user_id: str, *, fresh: bool) -> Snapshot | None:
        reads.append(True)
        return stale if len(reads) == 1 else real(user_id, fresh=fresh)

    monkeypatch.setattr(store, "_load", load)


def texts(secrets: list[SigningSecret]) -> list[str]:
    return [secret.text for secret in secrets]


def test_a_tenant_reads_the_secret_its_first_delivery_signs_with(webhook_secret_stores: SecretStores) -> None:
    delivery, api = webhook_secret_stores.instance(), webhook_secret_stores.instance()
    [signing] = delivery.signing_secrets("alice")
    WebhookSecret.parse(signing)
    [read] = api.secrets_of("alice")
    assert read.text == signing and read.valid_until is None and read.secret_id.startswith("sec_")
    # and a tenant that reads first gets one created, which then signs
    [first] = api.secrets_of("bob")
    assert delivery.signing_secrets("bob") == [first.text]
    assert delivery.signing_secrets("alice") != delivery.signing_secrets("bob")


def test_a_rotation_signs_under_both_secrets_for_the_grace_then_under_the_new_one(
    webhook_secret_stores: SecretStores,
) -> None:
    clock, store = webhook_secret_stores.clock, webhook_secret_stores.instance()
    [old] = store.secrets_of("alice")
    # When the tenant rotates with a grace of an hour
    new, previous = store.rotate("alice", timedelta(hours=1))
    # Then the new secret is current and the old one valid until the grace ends
    assert (previous.text, previous.valid_until) == (old.text, clock.now() + timedelta(hours=1))
    assert new.valid_until is None and new.text != old.text
    assert webhook_secret_stores.instance().signing_secrets("alice") == [new.text, old.text]
    assert texts(store.secrets_of("alice")) == [new.text, old.text]
    # And once it has ended only the new one signs, and the old one is no longer shown
    clock.advance(timedelta(hours=1))
    assert webhook_secret_stores.instance().signing_secrets("alice") == [new.text]
    assert texts(store.secrets_of("alice")) == [new.text]


def test_a_rotation_during_a_grace_drops_the_older_secret(webhook_secret_stores: SecretStores) -> None:
    store = webhook_secret_stores.instance()
    [first] = store.secrets_of("alice")
    second, _ = store.rotate("alice", DEFAULT_GRACE)
    third, previous = store.rotate("alice", DEFAULT_GRACE)
    assert previous.text == second.text
    assert first.text not in webhook_secret_stores.instance().signing_secrets("alice")
    assert texts(store.secrets_of("alice")) == [third.text, second.text]


def test_ending_a_rotation_drops_the_previous_secret_now(webhook_secret_stores: SecretStores) -> None:
    store = webhook_secret_stores.instance()
    store.secrets_of("alice")
    new, _ = store.rotate("alice", MAX_GRACE)
    assert texts(store.end_rotation("alice")) == [new.text]
    assert webhook_secret_stores.instance().signing_secrets("alice") == [new.text]
    assert texts(store.end_rotation("alice")) == [new.text]  # nothing to end: unchanged
    # and a rotation without grace leaves only the new secret at once
    [newest] = store.rotate("alice", timedelta(0))
    assert webhook_secret_stores.instance().signing_secrets("alice") == [newest.text]


def test_a_grace_out_of_bounds_is_refused_before_anything_changes(webhook_secret_stores: SecretStores) -> None:
    store = webhook_secret_stores.instance()
    before = store.secrets_of("alice")
    for grace in (timedelta(seconds=-1), MAX_GRACE + timedelta(seconds=1)):
        with pytest.raises(InvalidField, match="grace_s"):
            store.rotate("alice", grace)
    assert store.secrets_of("alice") == before


def test_tenants_secrets_are_their_own(webhook_secret_stores: SecretStores) -> None:
    store = webhook_secret_stores.instance()
    [bob] = store.secrets_of("bob")
    store.rotate("alice", DEFAULT_GRACE)
    assert texts(store.secrets_of("bob")) == [bob.text]


def test_two_rotations_based_on_the_same_read_both_answer_the_one_that_landed(
    webhook_secret_stores: SecretStores, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given two rotations that read the same secrets (the second read before the first wrote)
    first, second = webhook_secret_stores.instance(), webhook_secret_stores.instance()
    [old] = first.secrets_of("alice")
    stale: Snapshot | None = second._load("alice", fresh=True)
    answered = first.rotate("alice", DEFAULT_GRACE)
    read_once(monkeypatch, second, stale)
    # When the second writes on what it read
    settled = second.rotate("alice", timedelta(hours=2))
    # Then it did not overwrite the first: it answers the secrets the first rotation left, and those are kept
    assert texts(settled) == texts(answered) == [answered[0].text, old.text]
    assert texts(webhook_secret_stores.instance().secrets_of("alice")) == texts(answered)


def test_an_end_racing_a_rotation_does_not_drop_the_secret_the_rotation_answered(
    webhook_secret_stores: SecretStores, monkeypatch: pytest.MonkeyPatch,
) -> None:
    rotating, ending = webhook_secret_stores.instance(), webhook_secret_stores.instance()
    rotating.secrets_of("alice")
    rotating.rotate("alice", DEFAULT_GRACE)
    stale = ending._load("alice", fresh=True)
    answered = rotating.rotate("alice", DEFAULT_GRACE)
    read_once(monkeypatch, ending, stale)
    settled = ending.end_rotation("alice")
    assert texts(settled) == texts(answered) and len(answered) == 2
    assert webhook_secret_stores.instance().signing_secrets("alice") == texts(answered)
