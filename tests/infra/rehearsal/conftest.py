"""The rehearsal's stage: the synthesized default stack's DynamoDB tables, secret, functions and roles in moto
(in-process; no server), with IAM enforced while a test acts as a function (``Stage.acting_as``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.infra.rehearsal.stage import Stage
from tests.infra.rehearsal.template import REGION

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.infra.conftest import Synthesized


@pytest.fixture
def stage(default_app: Synthesized, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stage]:
    yield from _stood_up(default_app, monkeypatch)


@pytest.fixture
def targets_stage(synth: Callable[[str], Synthesized], monkeypatch: pytest.MonkeyPatch) -> Iterator[Stage]:
    """A stage allowing Lambda and SQS targets of its own account (``targets-aws``): with the delivery function."""
    yield from _stood_up(synth("targets-aws"), monkeypatch)


def _stood_up(app: Synthesized, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stage]:
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    # The simple Lambda backend: an invoke is authorized and accepted, never run (no Docker).
    with mock_aws(config={"lambda": {"use_docker": False}}):
        stage = Stage(app.template)
        stage.stand_up()
        stage.enforce(monkeypatch)
        yield stage
