"""The CLI against a fake HTTP layer (and, for tail, a fake Kafka consumer): no network, a fixed clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.client.cli.fakes import TOKEN, URL, Cli, FakeTransport

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def transport() -> FakeTransport:
    return FakeTransport()


@pytest.fixture
def cli(transport: FakeTransport, tmp_path: Path) -> Cli:
    return Cli(transport, tmp_path, {"JOBRUNNER_API_URL": URL, "JOBRUNNER_TOKEN": TOKEN})
