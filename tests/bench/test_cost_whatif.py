"""The runtime levers not taken (bench/cost/whatif.py), priced by the model."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from bench.cost.inputs import MeasuredInputs, load
from bench.cost.model import StageConfig, stages_of
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
    # No TTL deletes: each expiring row's delete, and the days a history row is billed after it expires (a dropped
    # table leaves storage at once: half a day on average instead of Keyspaces' purge lag), stored and recovered
    lag_days = inputs.history_purge_lag_days.value - 0.5
    per_gb = PRICES.keyspaces_storage.value + (
        PRICES.keyspaces_pitr.value if "task_history_v2" in prod.pitr_tables else 0.0)
    stored = lag_days * inputs.history_bytes_stored.value / 1e9 * per_gb * 1e6 / 30  # per million executions
    assert saved["no TTL deletes of history and schedule rows"] == pytest.approx(
        inputs.ttl_deletes.value * PRICES.keyspaces_ttl_delete.value * 1e6 + stored)
