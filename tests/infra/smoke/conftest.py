"""A manual clock and the fake API, for the smoke test's unit tests (no servers, no waiting)."""

from __future__ import annotations

import pytest

from infra.smoke.runner import ManualClock
from tests.infra.smoke.fakes import START, FakeApi


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def api(clock: ManualClock) -> FakeApi:
    return FakeApi(clock)
