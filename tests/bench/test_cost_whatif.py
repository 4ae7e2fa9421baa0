"""The runtime levers not taken (bench/cost/whatif.py), priced by the model."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from bench.cost.inputs import MeasuredInputs, load
from bench.cost.model import DAYS, GB, StageConfig, stages_of
from bench.cost.prices import PRICES
from bench.cost.whatif import LEVERS, cumulative

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"


@pytest.fixture
def inputs() -> MeasuredInputs:
    return load()


@pytest.fixture
def prod() -> StageConfig:
    return stages_of(CDK_JSON)["prod"]


def test_each_lever_not_taken_saves_what_its_inputs_say(prod: StageConfig, inputs: MeasuredInputs) -> None:
    rows = cumulative(prod, inputs, PRICES, 50e6, "on-demand")
    assert [name for name, _ in rows] == ["now", *(lever.name for lever in LEVERS)]
    saved = {name: before - after for (_, before), (name, after) in pairwise(rows)}
    # One history write less: one write request unit an execution, on-demand
    assert saved["history written once, with its outcome"] == pytest.approx(
        PRICES.keyspaces_write_request.value * 1e6)
    # No TTL deletes: each expiring row's delete, and a history row's storage from its expiry until its purge (a
    # dropped table leaves storage at once: half a day held on average instead of the purge lag)
    held = (inputs.history_purge_lag_days.value - 0.5) * inputs.history_bytes_stored.value / GB / DAYS * (
        PRICES.keyspaces_storage.value + PRICES.keyspaces_pitr.value)  # prod recovers task_history_v2
    assert "task_history_v2" in prod.pitr_tables
    assert saved["no TTL deletes of history and schedule rows"] == pytest.approx(
        (inputs.ttl_deletes.value * PRICES.keyspaces_ttl_delete.value + held) * 1e6)
