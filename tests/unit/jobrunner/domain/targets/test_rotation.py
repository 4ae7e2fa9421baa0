"""A tenant's webhook secrets over time: which are valid at an instant, and what a rotation leaves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.targets import DEFAULT_GRACE, MAX_GRACE, SigningSecret, TenantSecrets, check_grace

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
FIRST = SigningSecret("sec_1", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", NOW - timedelta(days=30))
SECOND = SigningSecret("sec_2", "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldY", NOW)
THIRD = SigningSecret("sec_3", "whsec_WFlaYWJjZGVmZ2hpamtsbW5vcHFyc3R1", NOW + timedelta(hours=1))


def test_a_rotation_makes_the_new_secret_current_and_keeps_the_old_one_for_the_grace() -> None:
    rotated = TenantSecrets((FIRST,)).rotated(SECOND, NOW, DEFAULT_GRACE)
    assert rotated.current == SECOND
    assert rotated.secrets[1].secret_id == "sec_1" and rotated.secrets[1].valid_until == NOW + timedelta(hours=24)
    # Then both are valid until the grace ends, only the new one from then on
    assert rotated.valid_at(NOW + timedelta(hours=23)).secrets == rotated.secrets
    assert rotated.valid_at(NOW + timedelta(hours=24)).secrets == (SECOND,)


def test_a_rotation_during_a_grace_drops_the_older_secret_so_at_most_two_are_valid() -> None:
    rotated = TenantSecrets((FIRST,)).rotated(SECOND, NOW, DEFAULT_GRACE)
    again = rotated.rotated(THIRD, NOW + timedelta(hours=1), timedelta(hours=2))
    assert [s.secret_id for s in again.secrets] == ["sec_3", "sec_2"]
    assert again.secrets[1].valid_until == NOW + timedelta(hours=3)


def test_a_rotation_without_grace_and_an_ended_rotation_leave_the_current_secret_alone() -> None:
    assert TenantSecrets((FIRST,)).rotated(SECOND, NOW, timedelta(0)).secrets == (SECOND,)
    assert TenantSecrets((FIRST,)).rotated(SECOND, NOW, DEFAULT_GRACE).rotation_ended().secrets == (SECOND,)


@pytest.mark.parametrize("grace", [timedelta(seconds=-1), MAX_GRACE + timedelta(seconds=1)])
def test_a_grace_outside_its_bounds_is_refused_naming_grace_s(grace: timedelta) -> None:
    with pytest.raises(InvalidField) as refused:
        TenantSecrets((FIRST,)).rotated(SECOND, NOW, grace)
    assert refused.value.field == "grace_s" and "604800" in refused.value.reason
    assert check_grace(MAX_GRACE) == MAX_GRACE


def test_the_stored_shape_round_trips_newest_first_and_older_entries_without_an_end_stay_valid() -> None:
    # Given the shape written before rotations had a grace: two entries, oldest first, neither with an end
    stored = [FIRST.to_dict(), SECOND.to_dict()]
    assert "valid_until" not in stored[0]
    secrets = TenantSecrets.from_list(stored)
    assert secrets.secrets == (SECOND, FIRST)
    assert secrets.valid_at(NOW + timedelta(days=365)).secrets == (SECOND, FIRST)
    rotated = secrets.rotated(THIRD, NOW, DEFAULT_GRACE)
    assert TenantSecrets.from_list(rotated.to_list()) == rotated


@pytest.mark.parametrize("stored", [[], {}, ["whsec_x"], None])
def test_a_stored_value_that_is_no_list_of_secrets_is_refused(stored: object) -> None:
    with pytest.raises(ValueError, match="not a list"):
        TenantSecrets.from_list(stored)


def test_a_secrets_text_never_shows_in_its_repr() -> None:
    assert FIRST.text not in repr(FIRST) and FIRST.text not in repr(TenantSecrets((FIRST,)))
