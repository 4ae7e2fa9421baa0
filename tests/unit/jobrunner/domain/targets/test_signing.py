"""Our Standard Webhooks signatures verify with a library the project does not write, rotations included."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.targets.signing import (
    MAX_KEY_BYTES,
    MIN_KEY_BYTES,
    WebhookSecret,
    signature,
    signature_header,
    signing_timestamp,
)

OLD = WebhookSecret(b"o" * 32)
NEW = WebhookSecret(bytes(range(32)))
MESSAGE_ID = "6f1c1e4e-1a5e-5b8a-9d0e-2f3a4b5c6d7e"


def headers(message_id: str, timestamp: str, signatures: str) -> dict[str, str]:
    return {"webhook-id": message_id, "webhook-timestamp": timestamp, "webhook-signature": signatures}


def now_timestamp() -> str:
    # The library checks the timestamp against its own clock (five minutes either way).
    return signing_timestamp(datetime.now(UTC))


def test_a_signature_verifies_with_the_library() -> None:
    body, timestamp = b'{"hello":"world"}', now_timestamp()
    signed = signature(NEW, MESSAGE_ID, timestamp, body)
    assert Webhook(NEW.text()).verify(body, headers(MESSAGE_ID, timestamp, signed)) == {"hello": "world"}


def test_the_signature_is_the_specifications_example() -> None:
    # The example of the Standard Webhooks specification: this secret, id, timestamp and body sign to this.
    secret = WebhookSecret.parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    signed = signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", b'{"test": 2432232314}')
    assert signed == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


@pytest.mark.parametrize("receiver_knows", [NEW, OLD], ids=["only the new secret", "only the old secret"])
def test_during_a_rotation_a_receiver_knowing_either_secret_verifies(receiver_knows: WebhookSecret) -> None:
    # Given a tenant rotating its secret, a delivery is signed under both, the new one first
    body, timestamp = b'{"n":1}', now_timestamp()
    signed = signature_header([NEW, OLD], MESSAGE_ID, timestamp, body)
    assert signed.count("v1,") == 2
    assert signed.split(" ")[0] == signature(NEW, MESSAGE_ID, timestamp, body)
    # When a receiver that knows one of them verifies, then the delivery passes
    assert Webhook(receiver_knows.text()).verify(body, headers(MESSAGE_ID, timestamp, signed)) == {"n": 1}


def test_a_receiver_with_another_secret_refuses() -> None:
    body, timestamp = b'{"n":1}', now_timestamp()
    signed = signature_header([NEW, OLD], MESSAGE_ID, timestamp, body)
    with pytest.raises(WebhookVerificationError):
        Webhook(WebhookSecret(b"x" * 32).text()).verify(body, headers(MESSAGE_ID, timestamp, signed))


@pytest.mark.parametrize(("body", "message_id", "shift"), [
    (b'{"amount":99}', MESSAGE_ID, 0), (b'{"amount":10}', MESSAGE_ID + "x", 0), (b'{"amount":10}', MESSAGE_ID, -1),
], ids=["body", "id", "timestamp"])
def test_a_signature_covers_the_body_the_id_and_the_timestamp(body: bytes, message_id: str, shift: int) -> None:
    timestamp = now_timestamp()
    signed = signature(NEW, MESSAGE_ID, timestamp, b'{"amount":10}')
    with pytest.raises(WebhookVerificationError):
        Webhook(NEW.text()).verify(body, headers(message_id, str(int(timestamp) + shift), signed))


@settings(max_examples=200, deadline=None)
@given(body=st.text(alphabet=st.characters(codec="utf-8"), max_size=300),
       message_id=st.text(alphabet=st.characters(codec="ascii", min_codepoint=0x21, max_codepoint=0x7E),
                          min_size=1, max_size=64),
       key=st.binary(min_size=MIN_KEY_BYTES, max_size=MAX_KEY_BYTES))
def test_any_body_id_and_key_verify_with_the_library(body: str, message_id: str, key: bytes) -> None:
    secret, timestamp = WebhookSecret(key), now_timestamp()
    signed = signature_header([secret], message_id, timestamp, body.encode())
    Webhook(secret.text()).verify(body.encode(), headers(message_id, timestamp, signed), json_parse=False)


@given(st.binary(min_size=MIN_KEY_BYTES, max_size=MAX_KEY_BYTES))
def test_a_secret_round_trips_through_its_text(key: bytes) -> None:
    secret = WebhookSecret(key)
    assert secret.text().startswith("whsec_")
    assert WebhookSecret.parse(secret.text()) == secret
    assert WebhookSecret.parse(secret.text().rstrip("=")) == secret  # padding is optional


@pytest.mark.parametrize(("text", "reason"), [
    ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_"),
    ("whsec_not base64!", "base64"),
    ("whsec_" + base64.b64encode(b"k" * (MIN_KEY_BYTES - 1)).decode(), "bytes"),
    ("whsec_" + base64.b64encode(b"k" * (MAX_KEY_BYTES + 1)).decode(), "bytes"),
    ("whsec_", "bytes"),
])
def test_a_malformed_secret_is_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidField, match=reason) as caught:
        WebhookSecret.parse(text)
    assert caught.value.field == "secret"


def test_a_secret_never_shows_its_key() -> None:
    assert "o" * 8 not in repr(OLD)
    assert "o" * 8 not in str(OLD)


def test_the_timestamp_is_whole_seconds_rounded_down() -> None:
    assert signing_timestamp(datetime(2026, 11, 22, 10, 0, 0, 999_000, tzinfo=UTC)) == "1795341600"


def test_signing_needs_a_secret_an_id_and_a_timestamp() -> None:
    with pytest.raises(ValueError, match="at least one secret"):
        signature_header([], MESSAGE_ID, "1", b"")
    with pytest.raises(ValueError, match="message id"):
        signature(NEW, "", "1", b"")
    with pytest.raises(ValueError, match="whole seconds"):
        signature(NEW, MESSAGE_ID, "1.5", b"")
