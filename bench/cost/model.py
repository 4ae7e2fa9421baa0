"""The cost model: pure functions from a stage's configuration, the measured inputs and the prices to
a month's bill, line by line (issue #33).

A month is 30 days. ``monthly_lines`` prices one load (executions a day, Keyspaces capacity mode, how
one-time jobs are submitted); a line's ``usd`` is what it adds to that month's bill, and ``at_rest``
says whether it is paid with nothing to do. Per million executions is the whole month (fixed costs
included) over the month's executions.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from pathlib import Path

    from bench.cost.inputs import MeasuredInputs
    from bench.cost.prices import PriceTable

DAYS = 30
HOURS = DAYS * 24
SECONDS = HOURS * 3600
MINUTES_A_DAY = 1440
GB = 1e9
#: Lambda gives a whole vCPU at 1,769 MB, a share of it below.
FULL_VCPU_MB = 1769
#: Keyspaces provisioned capacity is sized for the mean rate at this utilisation (auto scaling's target).
TARGET_UTILISATION = 0.7
#: Provisioned tables' auto scaling floor as a share of the expected mean rate (infra/constructs/storage.py).
AUTO_SCALING_FLOOR = 0.1
#: Kafka event pollers per event poller unit (EPU); an event source mapping pays whole EPUs.
POLLERS_PER_EPU = 10
#: The results function's trigger (infra/constructs/results.py): batch size and batching window.
RESULTS_BATCH_SIZE = 100
RESULTS_BATCHING_WINDOW_S = 1.0
#: The delivery function's trigger (infra/constructs/delivery.py): a batch is at most ``DeliveryRules.concurrency``
#: records (16), with the results trigger's 1-s window.
DELIVERY_BATCH_SIZE = 16
#: What a stage with targets adds to CloudWatch (infra/constructs/monitoring.py): the ``Deliveries_*`` metrics
#: and the delivery's alarms (errors, the failure rate over four of those metrics, duration, offset lag), each
#: metric an alarm reads billed as an alarm.
DELIVERY_METRICS = 4
DELIVERY_ALARM_METRICS = 7
#: A busy minute (an assumption): all of a minute's executions due at its first second, published and
#: answered within this many seconds (the drain benchmark publishes 100,000 due at one instant in 35 s).
BUSY_MINUTE_DRAIN_S = 15
#: Interface endpoints the stack creates (infra/stack.py): X-Ray, Secrets Manager, Lambda, STS, SQS, and
#: Keyspaces unless the stage uses an existing Cassandra cluster.
ENDPOINTS_WITHOUT_KEYSPACES = 5
#: Bytes a NAT gateway processes per HTTPS delivery, both directions: a new TLS connection (the handshake with
#: the receiver's certificate chain, ~5 KB), the signed request (~1.5 KB of headers and a small payload) and the
#: answer (~1 KB). An estimate, not a measurement: a larger payload or answer adds its bytes.
HTTPS_DELIVERY_BYTES = 8_000
#: Every Keyspaces table of cql/.
ALL_TABLES = ("job_table_v2", "task_schedule_v2", "task_history_v2", "job_idempotency", "job_changes", "calendars")
#: Placeholders for the settings that gate a deploy but not the bill (``StageConfig.from_cdk_json``).
_DEPLOY_ONLY = {"account": "000000000000", "region": "us-east-1", "alarm_email": "cost-model@example.com",
                "api_principals": ["arn:aws:iam::000000000000:role/cost-model"]}


Capacity = Literal["on-demand", "provisioned"]
Submit = Literal["batch", "single"]


class StageConfig(BaseModel):
    """What the bill depends on in a stage's configuration (``cdk.json`` and its ``stages`` entry)."""

    model_config = ConfigDict(frozen=True)

    stage: str = "dev"
    segments: int = 16
    scan_memory_mb: int = 512
    function_memory_mb: int = 512
    kafka_partitions: int = 3
    topics: int = 3
    #: None: MSK Serverless; else the provisioned cluster's brokers and each one's storage.
    kafka_brokers: int | None = None
    kafka_broker_storage_gib: int = 10
    endpoints: int = 6
    endpoint_zones: int = 2
    log_retention_days: int = 30
    rate_limited: bool = True
    reconcile_interval_minutes: int = 1
    #: Keyspaces tables with point-in-time recovery (``point_in_time_recovery``; before issue #33's levers: all).
    pitr_tables: tuple[str, ...] = ALL_TABLES
    #: The executions a day the stage is sized for (``expected_executions_per_day``); None: not said.
    expected_executions_per_day: float | None = None
    #: The results trigger's provisioned pollers at most; 0: on-demand mode (nothing billed at rest).
    results_pollers: int = 3
    #: Share of the results function's invocations that log their line per execution.
    results_log_sample_rate: float = 1.0
    #: X-Ray: "active" (every function), "sampled" (tick and reconciler; the others when their caller is), "off".
    xray: str = "active"
    #: The Keyspaces capacity mode the stage deploys (``keyspaces_capacity``).
    keyspaces_capacity: Capacity = "on-demand"
    #: The broker type of a provisioned cluster.
    kafka_broker_type: str = "kafka.t3.small"
    #: A WAF web ACL with one rate-based rule on the API stage (``waf_rate_limit``; on for protected stages).
    web_acl: bool = False
    #: One-time jobs' rows expire after their last fire and its history (``one_time_rows_expire``, on by default).
    one_time_rows_expire: bool = True
    #: The API stage's throttle, requests a second (``api_rate_limit``): a limit, not a cost.
    api_rate_limit: int = 50
    #: NAT gateways for the delivery function's HTTPS targets (``targets`` with https; ``nat_gateways``).
    nat_gateways: int = 0
    #: Jobs may name targets (``targets``): the delivery function, its trigger, topic and alarms are deployed, and
    #: every execution is priced as a delivery (an upper bound: a job of a topic's workers costs less).
    targets: bool = False
    #: The delivery function's memory (``infra.constructs.delivery.MEMORY_MB``).
    delivery_memory_mb: int = 512

    @classmethod
    def from_cdk_json(cls, cdk_json: Path, stage: str | None = None) -> StageConfig:
        """Read the stage's settings as the CDK app does (``infra.config``)."""
        from infra.config import DeploymentConfig, cli_context

        context = cli_context(cdk_json, ["-c", f"stage={stage}"] if stage else [])
        # The settings that only gate a deploy (where to, who reads the alarms) cost nothing: a stage not yet
        # filled in (prod, as shipped) is priced with placeholders for them.
        name = str(context.get("stage") or "dev")
        stages = dict(context.get("stages") or {})
        entry = dict(stages.get(name) or {})
        for key in ("account", "region"):
            if key in entry and entry[key] is None:
                entry[key] = _DEPLOY_ONLY[key]
        if entry.get("alarm_email") is None and not context.get("alarm_email") and (entry or name != "dev"):
            entry["alarm_email"] = _DEPLOY_ONLY["alarm_email"]
        admits_nobody = not entry.get("api_principals") and not context.get("api_principals")
        if admits_nobody and name != "dev" and context.get("api_auth", "iam") == "iam":
            entry["api_principals"] = _DEPLOY_ONLY["api_principals"]
        if entry:
            stages[name] = entry
        context = {**context, "stages": stages}
        config = DeploymentConfig.from_context(context.get)
        zones = len(config.availability_zones) or 2
        brokers = None
        storage = 10
        broker_type = "kafka.t3.small"
        if config.kafka_provisioned is not None:
            brokers = config.kafka_provisioned.brokers_per_zone * zones
            storage = config.kafka_provisioned.storage_gib
            broker_type = config.kafka_provisioned.instance_type
        limits = config.tenant_limits.values()
        return cls(
            stage=config.stage, segments=config.segments, scan_memory_mb=config.scan_memory_mb,
            kafka_partitions=config.kafka_partitions,
            # + job-results and the dead letters, and job-deliveries on a stage with targets
            topics=len(config.allowed_topics) + 2 + (1 if config.targets is not None else 0),
            kafka_brokers=brokers, kafka_broker_storage_gib=storage, kafka_broker_type=broker_type,
            endpoints=ENDPOINTS_WITHOUT_KEYSPACES + (1 if config.uses_keyspaces else 0)
            - (1 if config.xray_tracing == "off" else 0),
            endpoint_zones=config.endpoint_zones or zones, log_retention_days=config.log_retention_days,
            rate_limited=any(isinstance(v, dict) and v.get("submissions_per_second") for v in limits),
            reconcile_interval_minutes=config.reconcile_interval_minutes,
            web_acl=config.waf_rate_limit is not None,
            pitr_tables=config.point_in_time_recovery,
            expected_executions_per_day=config.expected_executions_per_day,
            results_pollers=config.results_pollers, results_log_sample_rate=config.results_log_sample_rate,
            xray=config.xray_tracing, keyspaces_capacity=config.keyspaces_capacity,
            api_rate_limit=config.api_rate_limit, nat_gateways=config.nat_gateways,
            targets=config.targets is not None, delivery_memory_mb=_delivery_memory_mb(),
            one_time_rows_expire=config.one_time_rows_expire,
        )




def _delivery_memory_mb() -> int:
    from infra.constructs.delivery import MEMORY_MB

    return MEMORY_MB


class Load(BaseModel):
    """What the stage is asked to do."""

    model_config = ConfigDict(frozen=True)

    executions_per_day: float
    capacity: Capacity = "on-demand"
    #: How one-time jobs arrive: 100 to a ``POST /jobs/batch`` request, or one ``POST /jobs`` each.
    submit: Submit = "batch"


class Line(BaseModel):
    """One line of the month's bill."""

    model_config = ConfigDict(frozen=True)

    service: str
    item: str
    usd: float
    at_rest: bool
    how: str


def stages_of(cdk_json: Path) -> dict[str, StageConfig]:
    """dev and every stage ``cdk.json`` lists, as the CDK app reads them."""
    import json

    listed = json.loads(cdk_json.read_text())["context"].get("stages") or {}
    return {name: StageConfig.from_cdk_json(cdk_json, name) for name in ("dev", *listed)}


class CapacityCheck(BaseModel):
    """A limit the load runs into before the bill does (not a cost)."""

    model_config = ConfigDict(frozen=True)

    limit: str
    capacity_per_second: float
    needed_per_second: float
    advice: str


def _sampled(invocations: float, inputs: MeasuredInputs) -> float:
    """X-Ray's default rule: the first requests each second (the reservoir), then a share of the rest."""
    reservoir = inputs.xray_reservoir_per_second.value * SECONDS
    return min(invocations, reservoir) + inputs.xray_sampled_share.value * max(0.0, invocations - reservoir)


def scan_rate(config: StageConfig, inputs: MeasuredInputs) -> float:
    """Executions a second one scan publishes, bound by its CPU share (docs/scaling.md, section 2)."""
    vcpu = min(config.scan_memory_mb / FULL_VCPU_MB, 1.0)
    return vcpu / (inputs.scan_cpu_ms.value / 1000)


def busy_share(config: StageConfig, executions_per_day: float) -> float:
    """The share of (minute, segment) partitions holding at least one execution (executions spread evenly)."""
    per_partition = executions_per_day / (MINUTES_A_DAY * config.segments)
    return 1 - math.exp(-per_partition)


class Usage(BaseModel):
    """What a load makes the stage do in a month: the quantities the lines price."""

    model_config = ConfigDict(frozen=True)

    executions: float
    one_time: float
    per_second: float
    #: (minute, segment) partitions, the share holding work, and how long a busy one's scan lives.
    partitions: float
    busy: float
    busy_scan_s: float
    scan_invocations: float
    api_requests: float
    results_batch: float
    results_invocations: float
    ticks: float
    reconciler_runs: float
    #: Executions delivered to targets by the delivery function (every one, on a stage with targets), its
    #: records per invocation and its invocations.
    deliveries: float = 0.0
    delivery_batch: float = 1.0
    delivery_invocations: float = 0.0


def usage(config: StageConfig, inputs: MeasuredInputs, load: Load) -> Usage:
    """The month's quantities for ``load``: scans are one per (minute, segment), a busy one living from its
    dispatch to its last row (longer when its CPU cannot keep up with its minute)."""
    executions = load.executions_per_day * DAYS
    per_second = load.executions_per_day / 86_400
    busy = busy_share(config, load.executions_per_day)
    rows = load.executions_per_day / (MINUTES_A_DAY * config.segments) / busy if busy else 0.0
    partitions = config.segments * MINUTES_A_DAY * DAYS
    one_time = executions * inputs.one_time_share.value
    batch = min(max(per_second / config.kafka_partitions * RESULTS_BATCHING_WINDOW_S, 1.0), RESULTS_BATCH_SIZE)
    ticks = MINUTES_A_DAY * DAYS
    deliveries = executions if config.targets else 0.0
    delivery_batch = min(max(per_second / config.kafka_partitions * RESULTS_BATCHING_WINDOW_S, 1.0),
                         DELIVERY_BATCH_SIZE)
    return Usage(
        executions=executions, one_time=one_time, per_second=per_second, partitions=partitions, busy=busy,
        busy_scan_s=inputs.busy_scan_seconds.value + max(0.0, rows / scan_rate(config, inputs) - 60),
        scan_invocations=partitions * (busy + (1 - busy) * inputs.idle_scan_invocations_per_partition.value),
        api_requests=one_time / (inputs.api_batch_size.value if load.submit == "batch" else 1),
        results_batch=batch, results_invocations=executions / batch,
        ticks=ticks, reconciler_runs=ticks / config.reconcile_interval_minutes,
        deliveries=deliveries, delivery_batch=delivery_batch, delivery_invocations=deliveries / delivery_batch,
    )


def monthly_lines(config: StageConfig, inputs: MeasuredInputs, prices: PriceTable, load: Load) -> list[Line]:
    """The month's bill for ``load`` on ``config``, one line per item."""
    u = usage(config, inputs, load)
    return [
        *_scans(u, config, inputs, prices),
        *_keyspaces(u, config, inputs, prices, load.capacity),
        *_dynamodb(u, config, inputs, prices),
        *_functions(u, config, inputs, prices, load.submit),
        *_kafka(u, config, inputs, prices),
        *_observability(u, config, inputs, prices),
        *_network(u, config, inputs, prices),
        *_deliveries(u, config, inputs, prices),
    ]


def _scans(u: Usage, c: StageConfig, i: MeasuredInputs, p: PriceTable) -> list[Line]:
    idle_s = i.idle_scan_seconds_per_partition.value
    gb_s = u.partitions * (u.busy * u.busy_scan_s + (1 - u.busy) * idle_s) * c.scan_memory_mb / 1024
    return [
        Line(service="Lambda", item="scans: GB-seconds", usd=gb_s * p.lambda_gb_second.value, at_rest=True,
             how=f"{c.segments} segments x 1,440 minutes x {DAYS} days; {u.busy:.0%} of partitions busy "
                 f"{u.busy_scan_s:.0f} s, the rest {idle_s:.1f} s; {c.scan_memory_mb} MB"),
        Line(service="Lambda", item="scans: requests", usd=u.scan_invocations * p.lambda_request.value, at_rest=True,
             how=f"1 a busy partition, {i.idle_scan_invocations_per_partition.value:.1f} an idle one"),
    ]


def _keyspaces(u: Usage, c: StageConfig, i: MeasuredInputs, p: PriceTable, capacity: Capacity) -> list[Line]:
    """Rows written, read and expired; what stays stored."""
    lines: list[Line] = []

    def add(item: str, usd: float, how: str, *, at_rest: bool = False) -> None:
        lines.append(Line(service="Keyspaces", item=item, usd=usd, at_rest=at_rest, how=how))

    wru = u.executions * (i.history_rows_written.value + i.schedule_rows_written.value) + (
        u.one_time * i.rows_per_one_time_submit.value)
    scan_reads = u.partitions * (u.busy * i.reads_per_busy_scan.value
                                 + (1 - u.busy) * i.reads_per_idle_partition.value)
    rru = u.executions * (i.job_reads_by_scan.value + i.schedule_page_reads.value + i.reads_by_results.value)
    if capacity == "on-demand":
        add("writes", wru * p.keyspaces_write_request.value,
            f"on-demand: {_per(wru, u.executions)} WRU per execution: history, next runs, a one-time job's job "
            "row and first run (its change-log entry is the job row's)")
        add("reads", (rru + scan_reads) * p.keyspaces_read_request.value,
            f"on-demand: {_per(rru, u.executions)} RRU per execution (job reads of the scan and the results "
            "function, the history row, the partition's pages) + each scan's late-lane polls", at_rest=True)
    else:
        wcu = wru / (DAYS * 86_400) / TARGET_UTILISATION
        rcu = (rru + scan_reads) / (DAYS * 86_400) / TARGET_UTILISATION
        if c.expected_executions_per_day:  # auto scaling's floor: a tenth of the expected mean, 1 unit a table at least
            floor = AUTO_SCALING_FLOOR * c.expected_executions_per_day / 86_400 / TARGET_UTILISATION
            wcu = max(wcu, floor * (i.history_rows_written.value + i.schedule_rows_written.value
                                    + i.one_time_share.value * i.rows_per_one_time_submit.value) + len(ALL_TABLES))
            rcu = max(rcu, floor * (i.job_reads_by_scan.value + i.reads_by_results.value) + len(ALL_TABLES))
        add("writes", wcu * HOURS * p.keyspaces_wcu_hour.value,
            f"provisioned: {wcu:,.0f} WCU, the mean rate at {TARGET_UTILISATION:.0%} utilisation (a flat load; "
            "auto scaling's floor is the stage's expected rate)", at_rest=bool(c.expected_executions_per_day))
        add("reads", rcu * HOURS * p.keyspaces_rcu_hour.value,
            f"provisioned: {rcu:,.0f} RCU, the mean rate at {TARGET_UTILISATION:.0%} utilisation", at_rest=True)
    add("the reconciler's reads", u.executions * i.reconciler_reads.value * p.keyspaces_read_request.value,
        f"{i.reconciler_reads.value} RRU per execution (LOCAL_ONE)")
    add("TTL deletes", u.executions * i.ttl_deletes.value * p.keyspaces_ttl_delete.value,
        f"{i.ttl_deletes.value} rows expiring per execution")
    # held while they live, and after until Keyspaces purges them (billed until then: ``*_purge_lag_days``)
    history_days = i.history_ttl_days.value + i.history_purge_lag_days.value
    changes_days = i.change_log_ttl_days.value + i.ttl_purge_lag_days.value
    history_gb = u.executions / DAYS * history_days * i.history_bytes_stored.value / GB
    changes_gb = u.executions / DAYS * (
        i.one_time_share.value * changes_days * i.change_log_bytes_per_one_time_job.value) / GB
    stored_gb = history_gb + changes_gb
    add("storage of the rows that expire", stored_gb * p.keyspaces_storage.value,
        f"{stored_gb:,.1f} GB held: history ({i.history_ttl_days.value:.0f} days + "
        f"{i.history_purge_lag_days.value:.0f} until purged) and change log ({i.change_log_ttl_days.value:.0f} + "
        f"{i.ttl_purge_lag_days.value:.0f})")
    recovered = [name for name, gb in (("task_history_v2", history_gb), ("job_changes", changes_gb))
                 if name in c.pitr_tables]
    recovered_gb = (history_gb if "task_history_v2" in recovered else 0.0) + (
        changes_gb if "job_changes" in recovered else 0.0)
    if recovered:
        add("point-in-time recovery of the rows that expire", recovered_gb * p.keyspaces_pitr.value,
            f"the GB of {' and '.join(recovered)} (PITR on {len(c.pitr_tables)} of {len(ALL_TABLES)} tables)")
    if c.one_time_rows_expire:  # each row deleted once, by its time to live, instead of kept
        add("TTL deletes of one-time job rows", u.one_time * p.keyspaces_ttl_delete.value,
            "a one-time job's row expires after its last fire (1 TTL delete a one-time job)")
        # held while it lives: its history's days and a little more (``domain.expiry``: twice its longest execution
        # and a day's margin; a day and a half counted, for jobs with a timeout and few retries), then until purged
        live_days = i.history_ttl_days.value + 1.5 + i.ttl_purge_lag_days.value
        live_gb = u.one_time / DAYS * live_days * i.job_row_bytes.value / GB
        price = p.keyspaces_storage.value + (p.keyspaces_pitr.value if "job_table_v2" in c.pitr_tables else 0.0)
        add("one-time job rows while they live", live_gb * price,
            f"{live_gb:,.1f} GB held: {live_days:.1f} days each (history, executions, a margin, until purged)")
    else:
        kept_gb = u.one_time * i.job_row_bytes.value / GB
        price = p.keyspaces_storage.value + (p.keyspaces_pitr.value if "job_table_v2" in c.pitr_tables else 0.0)
        add("one-time job rows kept (this month's; +1 month's each month)", kept_gb * price,
            f"{kept_gb:,.0f} GB a month that never expire (delete_after_last off, no TTL on the job table)")
    return lines


def _dynamodb(u: Usage, c: StageConfig, i: MeasuredInputs, p: PriceTable) -> list[Line]:
    """The scans' leases and progress; the submit's rate limit."""
    lease_wru = u.partitions * (u.busy * i.lease_calls_per_busy_scan.value * i.items_per_lease_renewal.value
                                + (1 - u.busy) * i.lease_writes_per_idle_partition.value)
    lease_rru = u.partitions * u.busy * i.lease_reads_per_busy_scan.value
    lines = [Line(service="DynamoDB", item="leases and heartbeats", at_rest=True,
                  usd=lease_wru * p.dynamodb_write_request.value + lease_rru * p.dynamodb_read_request.value,
                  how=f"{i.lease_calls_per_busy_scan.value:.1f} renewals x {i.items_per_lease_renewal.value:.0f} "
                      f"items a busy scan, {i.lease_writes_per_idle_partition.value:.0f} writes an idle partition")]
    if c.rate_limited:
        lines.append(Line(service="DynamoDB", item="the submit's rate limit", at_rest=False,
                          usd=u.api_requests * i.rate_limit_writes_per_submit_request.value
                          * p.dynamodb_write_request.value, how="one counter write per submit request"))
    return lines


def _results_pollers(u: Usage, c: StageConfig, i: MeasuredInputs) -> int:
    """The results trigger's provisioned pollers at this load (1, its minimum, at rest)."""
    return 1 if not u.executions else min(c.kafka_partitions, c.results_pollers, max(1, math.ceil(
        u.per_second / i.results_per_partition_per_second.value)))


def _functions(u: Usage, c: StageConfig, i: MeasuredInputs, p: PriceTable, submit: Submit) -> list[Line]:
    """The results function and its trigger, the API (one-time jobs, submitted once per execution), the ticks
    and the reconciler (every minute whatever the load)."""
    results_gb_s = (u.results_invocations * i.results_gb_seconds_per_invocation.value
                    + u.executions * i.results_gb_seconds.value)
    pollers = _results_pollers(u, c, i)
    epus = math.ceil(pollers / POLLERS_PER_EPU) if c.results_pollers else 0
    poller_how = (f"{pollers} poller(s), billed as {epus} EPU all month (minimum 1 poller)" if epus
                  else "on-demand mode: no provisioned pollers (and no bounded retries)")
    per_request = (i.api_gb_seconds_per_batch_request if submit == "batch" else i.api_gb_seconds_per_request).value
    return [
        Line(service="Lambda", item="results function", at_rest=False,
             usd=results_gb_s * p.lambda_gb_second.value + u.results_invocations * p.lambda_request.value,
             how=f"batches of {u.results_batch:,.0f} results ({c.kafka_partitions} partitions, 1-s window)"),
        Line(service="Lambda", item="results trigger: provisioned pollers", at_rest=True,
             usd=epus * HOURS * p.lambda_kafka_epu_hour.value,
             how=poller_how),
        Line(service="API Gateway", item=f"REST requests ({'POST /jobs/batch' if submit == 'batch' else 'POST /jobs'})",
             at_rest=False, usd=u.api_requests * p.api_gateway_rest_request.value,
             how=f"{_per(u.api_requests, u.executions, 4)} requests per execution"),
        Line(service="Lambda", item="API function", at_rest=False,
             usd=u.api_requests * (per_request * p.lambda_gb_second.value + p.lambda_request.value),
             how=f"{per_request:.2f} GB-s a request"),
        Line(service="Lambda", item="ticks and the reconciler", at_rest=True,
             usd=(u.ticks * i.tick_gb_seconds_per_run.value
                  + u.reconciler_runs * i.reconciler_idle_gb_seconds_per_run.value
                  + u.executions * i.reconciler_gb_seconds.value) * p.lambda_gb_second.value
             + (u.ticks + u.reconciler_runs) * p.lambda_request.value,
             how=f"{u.ticks:,.0f} ticks and {u.reconciler_runs:,.0f} reconciler runs a month, + the walk per "
                 "execution"),
    ]


def _kafka(u: Usage, c: StageConfig, i: MeasuredInputs, p: PriceTable) -> list[Line]:
    if c.kafka_brokers is not None:
        hourly = (p.msk_broker_hour_m7g_large if c.kafka_broker_type == "kafka.m7g.large"
                  else p.msk_broker_hour_t3_small).value
        return [Line(service="MSK provisioned", item="brokers and storage", at_rest=True,
                     usd=c.kafka_brokers * (HOURS * hourly + c.kafka_broker_storage_gib * p.msk_broker_storage.value),
                     how=f"{c.kafka_brokers} {c.kafka_broker_type} brokers, {c.kafka_broker_storage_gib} GiB each")]
    kafka_bytes = u.executions * (i.message_bytes.value + i.result_message_bytes.value)
    return [
        Line(service="MSK Serverless", item="cluster-hours", at_rest=True,
             usd=HOURS * p.msk_serverless_cluster_hour.value, how=f"{HOURS} hours"),
        Line(service="MSK Serverless", item="partition-hours", at_rest=True,
             usd=c.topics * c.kafka_partitions * HOURS * p.msk_serverless_partition_hour.value,
             how=f"{c.topics} topics x {c.kafka_partitions} partitions"),
        Line(service="MSK Serverless", item="data in and out", at_rest=False,
             usd=kafka_bytes / GB * (p.msk_serverless_gb_in.value + p.msk_serverless_gb_out.value),
             how=f"{i.message_bytes.value:.0f} B a job message + {i.result_message_bytes.value:.0f} B a result, "
                 "each written once and read once"),
    ]


def _observability(u: Usage, c: StageConfig, i: MeasuredInputs, p: PriceTable) -> list[Line]:
    """Logs, traces, metrics, alarms."""
    functions = (u.scan_invocations, u.results_invocations, u.api_requests, u.ticks, u.reconciler_runs)
    log_bytes = (u.executions * i.results_log_bytes.value * c.results_log_sample_rate
                 + sum(functions) * i.platform_log_bytes_per_invocation.value
                 + u.api_requests * i.access_log_bytes_per_request.value)
    traces = _traces(u, c, i)
    return [
        Line(service="CloudWatch Logs", item="ingestion and storage", at_rest=True,
             usd=log_bytes / GB * (p.logs_ingested_gb.value
                                   + p.logs_stored_gb_month.value * c.log_retention_days / DAYS),
             how=f"{i.results_log_bytes.value:.0f} B (the results function's INFO line) per execution "
                 f"in {c.results_log_sample_rate:.0%} of its invocations, "
                 f"{i.platform_log_bytes_per_invocation.value:.0f} B per invocation, "
                 f"{i.access_log_bytes_per_request.value:.0f} B per API access-log line; "
                 f"kept {c.log_retention_days} days"),
        Line(service="X-Ray", item="traces", at_rest=True,
             usd=traces * p.xray_trace_recorded.value,
             how=f"{traces:,.0f} traces ({c.xray}): {i.xray_reservoir_per_second.value:.0f} a second per function, "
                 f"then {i.xray_sampled_share.value:.0%}"),
        Line(service="CloudWatch", item="custom metrics, alarms, dashboard, secret", at_rest=True,
             usd=i.custom_metrics.value * p.cloudwatch_custom_metric.value + i.alarms.value * p.cloudwatch_alarm.value
             + p.cloudwatch_dashboard.value + p.secrets_manager_secret.value,
             how=f"{i.custom_metrics.value:.0f} metrics, {i.alarms.value:.0f} alarms, 1 dashboard, 1 secret"),
    ]


def _traces(u: Usage, c: StageConfig, i: MeasuredInputs) -> float:
    """Traces recorded: "active", every function samples its invocations; "sampled", the tick and the reconciler
    do, the scans are traced with the tick that dispatched them (counted all), the API's requests as API Gateway
    samples them, the results function's not at all (its pollers carry no trace); "off", none."""
    if c.xray == "off":
        return 0.0
    if c.xray == "active":
        functions = (u.scan_invocations, u.results_invocations, u.api_requests, u.ticks, u.reconciler_runs)
        return sum(_sampled(n, i) for n in functions)
    return u.ticks + u.reconciler_runs + u.scan_invocations + _sampled(u.api_requests, i)


def _network(u: Usage, c: StageConfig, i: MeasuredInputs, p: PriceTable) -> list[Line]:
    """The VPC's interface endpoints."""
    return [
        Line(service="VPC endpoints", item="endpoint-hours", at_rest=True,
             usd=c.endpoints * c.endpoint_zones * HOURS * p.vpc_endpoint_zone_hour.value,
             how=f"{c.endpoints} endpoints x {c.endpoint_zones} zones"),
        Line(service="VPC endpoints", item="data processed", at_rest=False,
             usd=u.executions * i.endpoint_bytes.value / GB * p.vpc_endpoint_gb.value,
             how=f"{i.endpoint_bytes.value:,.0f} B per execution"),
        *_nat(u, c, p),
        *_edge(u, c, p),
    ]


def _nat(u: Usage, c: StageConfig, p: PriceTable) -> list[Line]:
    """The NAT gateways of a stage whose jobs may name HTTPS targets: their hours (and Elastic IPs) at rest, and the
    bytes of the deliveries, priced as if every execution were an HTTPS delivery (an upper bound: Kafka, Lambda
    and SQS deliveries do not cross it). Internet data transfer out is not counted (nor anywhere in the model)."""
    if not c.nat_gateways:
        return []
    return [
        Line(service="NAT gateway", item="gateway-hours and their public IPv4 addresses", at_rest=True,
             usd=c.nat_gateways * HOURS * (p.nat_gateway_hour.value + p.public_ipv4_hour.value),
             how=f"{c.nat_gateways} NAT gateway{'s' if c.nat_gateways > 1 else ''} (HTTPS targets)"),
        Line(service="NAT gateway", item="data processed (HTTPS deliveries)", at_rest=False,
             usd=u.executions * HTTPS_DELIVERY_BYTES / GB * p.nat_gateway_gb.value,
             how=f"{HTTPS_DELIVERY_BYTES:,} B per delivery, every execution an HTTPS delivery (an upper bound)"),
    ]


def _edge(u: Usage, c: StageConfig, p: PriceTable) -> list[Line]:
    """The API stage's web ACL (one rate-based rule), when the stage has one: it inspects every API request."""
    if not c.web_acl:
        return []
    return [
        Line(service="AWS WAF", item="web ACL and its rate rule", at_rest=True,
             usd=p.waf_web_acl_month.value + p.waf_rule_month.value, how="1 web ACL, 1 rule"),
        Line(service="AWS WAF", item="requests inspected", at_rest=False,
             usd=u.api_requests * p.waf_request.value,
             how=f"{_per(u.api_requests, u.executions, 4)} API requests per execution"),
    ]


def _deliveries(u: Usage, c: StageConfig, i: MeasuredInputs, p: PriceTable) -> list[Line]:
    """The delivery function of a stage with targets: its Lambda time (each invocation lasting its slowest call,
    plus its own work), its trigger's pollers, its log lines, traces, metrics and alarms. Its messages and results
    are the per-execution lines' (a delivery publishes a result like a worker; its execution's message goes to
    ``job-deliveries`` instead of ``jobs``), its topic is in the partition-hours and the NAT gateway in
    ``_nat``."""
    if not c.targets:
        return []
    seconds = i.delivery_call_seconds.value + i.delivery_overhead_seconds_per_invocation.value
    gb_s = u.delivery_invocations * seconds * c.delivery_memory_mb / 1024
    # The trigger has as many pollers as the results trigger (``max_pollers=results_pollers``), in the same poller
    # group (infra ``kafka_trigger``): the group pays whole EPUs for both, so the delivery adds only the units its
    # pollers take beyond the results trigger's (none while both fit in one: at rest, and up to 5 pollers each).
    pollers = _results_pollers(u, c, i)
    epus = (math.ceil(2 * pollers / POLLERS_PER_EPU) - math.ceil(pollers / POLLERS_PER_EPU)) if c.results_pollers else 0
    log_bytes = u.deliveries * i.delivery_log_bytes.value + u.delivery_invocations * (
        i.platform_log_bytes_per_invocation.value)
    traces = _sampled(u.delivery_invocations, i) if c.xray == "active" else 0.0
    return [
        Line(service="Lambda", item="delivery function", at_rest=False,
             usd=gb_s * p.lambda_gb_second.value + u.delivery_invocations * p.lambda_request.value,
             how=f"batches of {u.delivery_batch:,.0f} deliveries, each invocation {seconds:.2f} s (its slowest call "
                 f"and its own work) of {c.delivery_memory_mb} MB"),
        Line(service="Lambda", item="delivery trigger: provisioned pollers", at_rest=True,
             usd=epus * HOURS * p.lambda_kafka_epu_hour.value,
             how=(f"{pollers} poller(s) in the results trigger's poller group: {epus} EPU more all month"
                  if c.results_pollers else "on-demand mode, as the results trigger: no provisioned pollers")),
        Line(service="CloudWatch Logs", item="the delivery function's lines", at_rest=False,
             usd=log_bytes / GB * (p.logs_ingested_gb.value + p.logs_stored_gb_month.value * c.log_retention_days
                                   / DAYS),
             how=f"{i.delivery_log_bytes.value:.0f} B (its INFO line) per delivery, "
                 f"{i.platform_log_bytes_per_invocation.value:.0f} B per invocation; kept {c.log_retention_days} days"),
        Line(service="X-Ray", item="the delivery function's traces", at_rest=False,
             usd=traces * p.xray_trace_recorded.value,
             how=f"{c.xray}: {i.xray_reservoir_per_second.value:.0f} a second, then "
                 f"{i.xray_sampled_share.value:.0%}" if c.xray == "active" else f"{c.xray}: not traced"),
        Line(service="CloudWatch", item="the delivery's metrics and alarms", at_rest=True,
             usd=DELIVERY_METRICS * p.cloudwatch_custom_metric.value
             + DELIVERY_ALARM_METRICS * p.cloudwatch_alarm.value,
             how=f"{DELIVERY_METRICS} metrics (Deliveries_*), 4 alarms reading {DELIVERY_ALARM_METRICS} metrics"),
    ]


def _per(count: float, executions: float, digits: int = 2) -> str:
    return f"{count / executions:.{digits}f}" if executions else "0"


def total(lines: list[Line]) -> float:
    return sum(line.usd for line in lines)


def per_million(usd_a_month: float, executions_per_day: float) -> float:
    """A month's cost over the month's executions, per million."""
    return usd_a_month / (executions_per_day * DAYS / 1e6)


def eventbridge_per_million(prices: PriceTable) -> float:
    """EventBridge Scheduler's price per million invocations (nothing at rest)."""
    return prices.eventbridge_scheduler_invocation.value * 1e6


def at_rest(config: StageConfig, inputs: MeasuredInputs, prices: PriceTable,
            capacity: Capacity = "on-demand") -> list[Line]:
    """The month's bill with nothing to do."""
    return [line for line in monthly_lines(config, inputs, prices, Load(executions_per_day=0, capacity=capacity))
            if line.usd]


def capacity_checks(config: StageConfig, inputs: MeasuredInputs, executions_per_day: float) -> list[CapacityCheck]:
    """Limits the load meets: the results function (one invocation per Kafka partition) and the scans' CPU."""
    mean = executions_per_day / 86_400
    minute = executions_per_day / MINUTES_A_DAY
    burst = minute / BUSY_MINUTE_DRAIN_S
    results = config.kafka_partitions * inputs.results_per_partition_per_second.value
    needed = math.ceil(burst / inputs.results_per_partition_per_second.value)
    scans = config.segments * scan_rate(config, inputs)
    return [
        CapacityCheck(limit=f"results function ({config.kafka_partitions} Kafka partitions)",
                  capacity_per_second=results, needed_per_second=burst,
                  advice=f"kafka_partitions ≥ {needed} for a busy minute ({mean:,.0f}/s on average)"),
        CapacityCheck(limit=f"scans ({config.segments} segments x {config.scan_memory_mb} MB, CPU-bound)",
                  capacity_per_second=scans, needed_per_second=burst,
                  advice=f"≥ {math.ceil(burst / scan_rate(config, inputs))} segments at {config.scan_memory_mb} MB "
                         "for a busy minute"),
    ]


def sized_for(config: StageConfig, executions_per_day: float) -> StageConfig:
    """``config`` as ``expected_executions_per_day`` sizes it (``infra.config``): segments, partitions, pollers."""
    from infra.config import RESULTS_PER_PARTITION_S, busy_minute_rate, partitions_for, segments_for

    partitions = partitions_for(executions_per_day)
    return config.model_copy(update={
        "segments": segments_for(executions_per_day, config.scan_memory_mb), "kafka_partitions": partitions,
        "results_pollers": 0 if busy_minute_rate(executions_per_day) <= RESULTS_PER_PARTITION_S else partitions,
        "expected_executions_per_day": executions_per_day})


#: The busy-minute ingress (job messages and results, MB/s) one pair of brokers of a type is taken to carry: an
#: assumption well inside what MSK's sizing guidance gives these types, to verify with its sizing script.
BROKER_PAIR_INGRESS_MB_S = {"kafka.t3.small": 5.0, "kafka.m7g.large": 40.0}


def kafka_options(config: StageConfig, inputs: MeasuredInputs, prices: PriceTable,
                  executions_per_day: float, *, production: bool = False) -> dict[str, tuple[str, float]]:
    """A month of each Kafka choice at ``executions_per_day``: MSK Serverless, and the fewest provisioned brokers
    (pairs, one per zone) that carry a busy minute (``production``: no burstable kafka.t3 brokers, which MSK
    recommends for development only); label and dollars."""
    busy_mb_s = executions_per_day / MINUTES_A_DAY / BUSY_MINUTE_DRAIN_S * (
        inputs.message_bytes.value + inputs.result_message_bytes.value) / 1e6
    types = {t: mb for t, mb in BROKER_PAIR_INGRESS_MB_S.items() if not (production and t.startswith("kafka.t3"))}
    broker_type = next((t for t, mb in types.items() if busy_mb_s <= mb), "kafka.m7g.large")
    pairs = max(1, math.ceil(busy_mb_s / BROKER_PAIR_INGRESS_MB_S[broker_type]))
    load = Load(executions_per_day=executions_per_day)
    serverless = config.model_copy(update={"kafka_brokers": None})
    provisioned = config.model_copy(update={"kafka_brokers": 2 * pairs, "kafka_broker_type": broker_type})
    u = usage(config, inputs, load)
    return {
        "serverless": ("MSK Serverless", total(_kafka(u, serverless, inputs, prices))),
        "provisioned": (f"{2 * pairs} x {broker_type}", total(_kafka(u, provisioned, inputs, prices))),
    }
