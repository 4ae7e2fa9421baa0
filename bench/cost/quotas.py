"""The service quotas on the path, beside what a load needs of each (issue #33, "1 B a day on paper").

Each quota is an AWS default (or, for the stage throttle, the stage's own setting), with its source and the
date it was read. ``quota_checks`` works out what one load asks of each from the same inputs the bill uses:
a throughput quota is met by a busy minute (all of a minute due at its first second, out within
``BUSY_MINUTE_DRAIN_S``), the submit path by the mean rate of one-time submissions (they are not assumed
to bunch). The stage is sized for the load first (``sized_for``: segments, partitions), as a deploy does.
A headroom below 1 says the load needs more than the default: the advice says what reaches it.
"""

from __future__ import annotations

import math
from datetime import date
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from bench.cost.model import BUSY_MINUTE_DRAIN_S, MINUTES_A_DAY, sized_for

if TYPE_CHECKING:
    from bench.cost.inputs import MeasuredInputs
    from bench.cost.model import StageConfig

#: A tenant's jobs are spread over this many partitions of ``job_table_v2`` (``adapters.stores.codec``).
JOB_SHARDS = 16
#: The results function reads the job once per result (and the history row once).
RESULT_JOB_READS = 1.0
#: Replicas of each Kafka partition on a provisioned cluster (infra: two brokers, one a zone).
KAFKA_REPLICATION = 2
_CHECKED = date(2026, 11, 28)


class Quota(BaseModel):
    """One limit on the path: its default, whether AWS raises it on request, and where that is written."""

    model_config = ConfigDict(frozen=True)

    service: str
    name: str
    default: float
    unit: str
    adjustable: bool
    source: str
    checked: date = _CHECKED


_KEYSPACES = "https://docs.aws.amazon.com/keyspaces/latest/devguide/quotas.html"
QUOTAS: dict[str, Quota] = {
    "keyspaces_table_writes": Quota(
        service="Keyspaces", name="write throughput of one table", default=40_000, unit="WRU or WCU a second",
        adjustable=True, source=f"{_KEYSPACES} (Max write throughput per second, per table and Region)"),
    "keyspaces_table_reads": Quota(
        service="Keyspaces", name="read throughput of one table", default=40_000, unit="RRU or RCU a second",
        adjustable=True, source=f"{_KEYSPACES} (Max read throughput per second, per table and Region)"),
    "keyspaces_account_writes": Quota(
        service="Keyspaces", name="provisioned writes of all tables", default=80_000, unit="WCU",
        adjustable=True,
        source="https://docs.aws.amazon.com/keyspaces/latest/devguide/bulk-upload-capacity.html (up to 40,000 "
               "WCUs a table and 80,000 across the account by default)"),
    "keyspaces_partition_reads": Quota(
        service="Keyspaces", name="reads of one partition", default=3_000, unit="RCU a second", adjustable=False,
        source="https://docs.aws.amazon.com/keyspaces/latest/devguide/bp-partition-key-design.html (a partition's "
               "traffic up to 3,000 RCUs and 1,000 WCUs)"),
    "lambda_concurrency": Quota(
        service="Lambda", name="concurrent executions of the Region", default=1_000, unit="executions",
        adjustable=True, source="https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html "
                                "(Concurrent executions: 1,000, up to tens of thousands)"),
    "api_account": Quota(
        service="API Gateway", name="throttle of the account and Region", default=10_000, unit="requests a second",
        adjustable=True, source="https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html (10,000 "
                                "RPS; 2,500 in some newer Regions)"),
    "api_stage": Quota(
        service="API Gateway", name="the stage's throttle (cdk.json api_rate_limit)", default=50,
        unit="requests a second", adjustable=True,
        source="infra/config/context.py (api_rate_limit: the project's own setting, not an AWS quota)"),
    "dynamodb_partition_writes": Quota(
        service="DynamoDB", name="writes of one partition (a tenant's rate item)", default=1_000,
        unit="WCU a second", adjustable=False,
        source="https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html "
               "(each partition: 1,000 write units and 3,000 read units a second)"),
    "msk_partitions_per_broker": Quota(
        service="MSK", name="partitions per broker (replicas included), recommended", default=1_000,
        unit="partitions", adjustable=False,
        source="https://docs.aws.amazon.com/msk/latest/developerguide/bestpractices.html (right-size your cluster: "
               "partitions per broker; 1,000 for the large sizes, 300 for kafka.t3.small)"),
}
#: The recommended partitions per broker of the smallest type (the same source).
T3_SMALL_PARTITIONS = 300


class QuotaCheck(BaseModel):
    """What one load asks of one quota."""

    model_config = ConfigDict(frozen=True)

    quota: str
    needed: float
    limit: float
    advice: str

    @property
    def headroom(self) -> float:
        return self.limit / self.needed if self.needed else math.inf


def _advice(key: str, quota: Quota, needed: float, limit: float, otherwise: str) -> str:
    if needed <= limit:
        return "fits"
    if key == "api_stage":
        return f"set api_rate_limit ≥ {math.ceil(needed * 1.25):,} (25 % above the need) in cdk.json"
    if quota.adjustable:
        return f"ask for ≥ {math.ceil(needed * 1.25):,} (25 % above the need)"
    return otherwise


def quota_checks(config: StageConfig, inputs: MeasuredInputs, executions_per_day: float,
                 *, api_batch_size: float | None = None) -> list[QuotaCheck]:
    """Each quota of ``QUOTAS`` against what ``executions_per_day`` asks of it, the stage sized for that load."""
    from infra.config import scan_concurrency
    from infra.preflight import OTHER_FUNCTIONS

    sized = sized_for(config, executions_per_day)
    busy = executions_per_day / MINUTES_A_DAY / BUSY_MINUTE_DRAIN_S
    mean = executions_per_day / 86_400
    batch = api_batch_size if api_batch_size is not None else inputs.api_batch_size.value
    submits = mean * inputs.one_time_share.value
    requests = submits / batch
    job_reads = busy * (inputs.job_reads_by_scan.value + RESULT_JOB_READS)
    history_writes = busy * inputs.history_rows_written.value
    all_writes = busy * (inputs.history_rows_written.value + inputs.schedule_rows_written.value) + (
        submits * inputs.rows_per_one_time_submit.value)
    per_broker = T3_SMALL_PARTITIONS if sized.kafka_broker_type == "kafka.t3.small" else QUOTAS[
        "msk_partitions_per_broker"].default
    brokers = sized.kafka_brokers or 0
    needs: list[tuple[str, float, float | None, str]] = [
        ("keyspaces_table_writes", history_writes, None,
         "task_history_v2 in a busy minute: the scan's record and the result's"),
        ("keyspaces_table_reads", job_reads, None, "job_table_v2 in a busy minute: the scan's and the results'"),
        ("keyspaces_account_writes", all_writes, None, "every table in a busy minute (provisioned capacity)"),
        ("keyspaces_partition_reads", job_reads / JOB_SHARDS, None,
         f"one tenant holding the whole busy minute: its jobs span {JOB_SHARDS} partitions"),
        ("lambda_concurrency", scan_concurrency(sized.segments) + OTHER_FUNCTIONS
         + sized.kafka_partitions * (2 if sized.targets else 1), None,
         f"scans of {sized.segments} segments, results{' and deliveries' if sized.targets else ''} on "
         f"{sized.kafka_partitions} partitions, the others"),
        ("api_account", requests, None, f"one-time submits in batches of {batch:,.0f}, at the mean rate"),
        ("api_account", submits, None, "one-time submits one a request, at the mean rate"),
        ("api_stage", requests, float(sized.api_rate_limit), f"submits in batches of {batch:,.0f}, through this stage"),
        ("api_stage", submits, float(sized.api_rate_limit), "submits one a request, through this stage"),
        ("dynamodb_partition_writes", requests * inputs.rate_limit_writes_per_submit_request.value, None,
         f"one tenant sending every batch of {batch:,.0f} (its rate item is one key)"),
        ("dynamodb_partition_writes", submits * inputs.rate_limit_writes_per_submit_request.value, None,
         "one tenant sending every submit one a request"),
    ]
    if brokers:  # MSK Serverless places partitions itself
        needs.append((
            "msk_partitions_per_broker", sized.kafka_partitions * sized.topics * KAFKA_REPLICATION / brokers,
            float(per_broker), f"{sized.kafka_partitions} partitions x {sized.topics} topics x {KAFKA_REPLICATION} "
                               f"replicas over {brokers} brokers ({sized.kafka_broker_type})"))
    otherwise = {
        "keyspaces_partition_reads": f"more job shards, or no tenant above {3_000 * JOB_SHARDS / 2:,.0f} executions "
                                     "a second in a busy minute",
        "dynamodb_partition_writes": f"batches (of {batch:,.0f}: {requests:,.0f} writes a second), or the rate item "
                                     "split over keys",
        "msk_partitions_per_broker": "more or larger brokers",
    }
    checks = []
    for key, needed, limit, what in needs:
        quota = QUOTAS[key]
        wall = quota.default if limit is None else limit
        advice = _advice(key, quota, needed, wall, otherwise.get(key, ""))
        checks.append(QuotaCheck(quota=key, needed=needed, limit=wall, advice=f"{what}: {advice}"))
    return checks
