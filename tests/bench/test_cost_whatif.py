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


def test_the_product_choices_save_the_history_they_stop_keeping(prod: StageConfig, inputs: MeasuredInputs) -> None:
    rows = dict(cumulative(prod, inputs, PRICES, 50e6, "provisioned"))
    names = [lever.name for lever in LEVERS]
    seven, unrecovered = names.index("history kept 7 days by default, not 30"), names.index(
        "no point-in-time recovery of the history")
    before, after = rows[names[seven - 1]], rows[names[seven]]
    # 23 days less of each history row and of each one-time job's row (which lives as long as its history), stored
    # and recovered (prod recovers both tables)
    assert {"task_history_v2", "job_table_v2"} <= set(prod.pitr_tables)
    per_gb_day = (PRICES.keyspaces_storage.value + PRICES.keyspaces_pitr.value) / 30 / 1e9
    history = 23 * inputs.history_bytes_stored.value * per_gb_day * 1e6
    job_rows = 23 * inputs.one_time_share.value * inputs.job_row_bytes.value * per_gb_day * 1e6
    assert before - after == pytest.approx(history + job_rows)
    # and without the history's point-in-time recovery, its rows' recovery is no longer billed (7 days held, and the
    # purge lag the dropped tables left: half a day)
    held_days = 7 + 0.5
    assert rows[names[unrecovered - 1]] - rows[names[unrecovered]] == pytest.approx(
        held_days * inputs.history_bytes_stored.value * PRICES.keyspaces_pitr.value / 30 / 1e9 * 1e6)

