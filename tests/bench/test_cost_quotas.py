"""The quotas on the path (bench/cost/quotas.py): what a load asks of each, and what reaches it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.cost.inputs import MeasuredInputs, load
from bench.cost.model import StageConfig, stages_of
from bench.cost.quotas import JOB_SHARDS, QUOTAS, QuotaCheck, quota_checks
from jobrunner.adapters.stores import codec

ROOT = Path(__file__).resolve().parents[2]
CDK_JSON = ROOT / "cdk.json"


@pytest.fixture
def inputs() -> MeasuredInputs:
    return load()


@pytest.fixture
def prod() -> StageConfig:
    return stages_of(CDK_JSON)["prod"]


def _over(checks: list[QuotaCheck]) -> dict[str, list[QuotaCheck]]:
    over: dict[str, list[QuotaCheck]] = {}
    for check in checks:
        if check.needed > check.limit:
            over.setdefault(check.quota, []).append(check)
    return over


def test_every_quota_says_where_it_is_written_and_when_it_was_read() -> None:
    for key, quota in QUOTAS.items():
        assert quota.source.startswith(("https://docs.aws.amazon.com/", "infra/")), key
        assert quota.checked.year >= 2026, key
        assert quota.default > 0, key


def test_the_job_shards_are_the_stores(inputs: MeasuredInputs) -> None:
    assert codec.JOB_SHARDS == JOB_SHARDS


def test_50_m_a_day_fits_every_default_on_the_prod_stage_in_batches(
        prod: StageConfig, inputs: MeasuredInputs) -> None:
    checks = quota_checks(prod, inputs, 50e6)
    assert {c.quota for c in checks} == set(QUOTAS)  # prod has brokers, so every quota is checked
    # Only one job a request (about 290 a second) is more than the stage's throttle of 50
    over = _over(checks)
    assert list(over) == ["api_stage"] and "one a request" in over["api_stage"][0].advice
    assert all(c.advice.endswith("fits") for c in checks if c not in over["api_stage"])


def test_1_b_a_day_names_each_quota_to_raise_and_each_limit_of_the_design(
        prod: StageConfig, inputs: MeasuredInputs) -> None:
    over = _over(quota_checks(prod, inputs, 1e9))
    # The table throughputs: raised on request, with the figure to ask for
    assert set(over) == {"keyspaces_table_writes", "keyspaces_table_reads", "keyspaces_account_writes",
                         "keyspaces_partition_reads", "api_stage", "dynamodb_partition_writes"}
    writes = over["keyspaces_table_writes"][0]
    assert writes.needed == pytest.approx(1e9 / 1440 / 15 * 2)  # a busy minute's history: 2 rows an execution
    assert f"ask for ≥ {math.ceil(writes.needed * 1.25):,}" in writes.advice
    # A partition's reads are not a quota: the advice is the design's limit, not a request
    assert "ask for" not in over["keyspaces_partition_reads"][0].advice
    assert "24,000 executions a second" in over["keyspaces_partition_reads"][0].advice
    # The stage's throttle is the project's own setting: about 58 batch requests a second need more than 50
    batch, single = sorted(over["api_stage"], key=lambda c: c.needed)
    assert batch.needed == pytest.approx(1e9 / 86_400 * inputs.one_time_share.value / 100)
    assert 50 < batch.needed < 60 and "api_rate_limit ≥ 73" in batch.advice
    assert single.needed > 5_000
    # One tenant's rate item takes single submits at 5,800 a second, over a partition's 1,000; batches fit
    assert [c.needed > 5_000 for c in over["dynamodb_partition_writes"]] == [True]


def test_a_higher_stage_throttle_clears_the_batches(prod: StageConfig, inputs: MeasuredInputs) -> None:
    raised = prod.model_copy(update={"api_rate_limit": 100})
    stage = [c for c in quota_checks(raised, inputs, 1e9) if c.quota == "api_stage"]
    assert [c.needed <= c.limit for c in sorted(stage, key=lambda c: c.needed)] == [True, False]


def test_a_serverless_cluster_has_no_partitions_per_broker_to_check(inputs: MeasuredInputs) -> None:
    dev = StageConfig.from_cdk_json(CDK_JSON, "dev")
    assert dev.kafka_brokers is None
    assert "msk_partitions_per_broker" not in {c.quota for c in quota_checks(dev, inputs, 1e9)}


def test_nothing_needed_is_endless_headroom() -> None:
    assert QuotaCheck(quota="api_stage", needed=0, limit=50, advice="").headroom == math.inf



def test_a_stage_with_targets_needs_the_delivery_functions_concurrency_too(
        prod: StageConfig, inputs: MeasuredInputs) -> None:
    def concurrency(stage: StageConfig) -> QuotaCheck:
        return next(c for c in quota_checks(stage, inputs, 50e6) if c.quota == "lambda_concurrency")

    without, with_targets = concurrency(prod), concurrency(prod.model_copy(update={"targets": True}))
    # one delivery invocation per partition at once, beside the results function's
    partitions = with_targets.advice.split(" on ")[1].split(" partitions")[0]
    assert with_targets.needed - without.needed == int(partitions)
    assert "results and deliveries on" in with_targets.advice and "deliveries" not in without.advice
