"""The cost model (bench/cost), without servers: its lines, its inputs, and the tables of docs/scaling.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cost.inputs import INPUTS_PATH, Figure, MeasuredInputs, load, measured_from, record
from bench.cost.model import (
    DAYS,
    Line,
    Load,
    StageConfig,
    at_rest,
    busy_share,
    capacity_checks,
    monthly_lines,
    per_million,
    sized_for,
    stages_of,
    total,
)
from bench.cost.prices import PRICES
from bench.cost.tables import blocks_in, doc_tables, render_docs

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "scaling.md"
CDK_JSON = ROOT / "cdk.json"


@pytest.fixture
def inputs() -> MeasuredInputs:
    return load()


@pytest.fixture
def config() -> StageConfig:
    return StageConfig.from_cdk_json(CDK_JSON)


def _by_item(lines: list[Line]) -> dict[str, Line]:
    return {f"{line.service}: {line.item}": line for line in lines}


def _with(inputs: MeasuredInputs, **values: float) -> MeasuredInputs:
    return inputs.model_copy(update={name: Figure(value=value, kind="derived", source="test")
                                     for name, value in values.items()})


def test_the_docs_tables_are_the_models() -> None:
    # Given docs/scaling.md as committed
    text = DOCS.read_text()
    # When its cost tables are generated again from cdk.json, the inputs and the prices
    regenerated = render_docs(text, doc_tables(StageConfig.from_cdk_json(CDK_JSON), load(), PRICES,
                                               stages_of(CDK_JSON)))
    # Then nothing changes (else: `python -m bench.cost --write-docs`)
    assert regenerated == text, "docs/scaling.md's cost tables differ from the model: python -m bench.cost --write-docs"
    assert set(blocks_in(text)) == {"prices", "per-million", "capacity", "at-rest", "kafka", "targets", "quotas",
                                    "quota-sources", "levers", "deliveries"}


def test_a_marker_naming_no_table_is_an_error() -> None:
    with pytest.raises(KeyError, match="nothing"):
        render_docs("<!-- cost:begin nothing -->\nold\n<!-- cost:end -->\n", [])


def test_doubling_executions_doubles_the_variable_lines_and_leaves_the_fixed_ones(
        config: StageConfig, inputs: MeasuredInputs) -> None:
    # Given two loads at which every partition has work and the results' batches are full
    once = _by_item(monthly_lines(config, inputs, PRICES, Load(executions_per_day=50e6)))
    twice = _by_item(monthly_lines(config, inputs, PRICES, Load(executions_per_day=100e6)))
    # Then what is paid per execution doubles
    for key, line in once.items():
        if not line.at_rest:
            assert twice[key].usd == pytest.approx(2 * line.usd, rel=1e-9), key
    # And what is paid by the hour or the month stays
    for key in ("MSK Serverless: cluster-hours", "MSK Serverless: partition-hours", "VPC endpoints: endpoint-hours",
                "CloudWatch: custom metrics, alarms, dashboard, secret",
                "Lambda: results trigger: provisioned pollers"):
        assert twice[key].usd == once[key].usd, key
    # And the scans, billed by the wall clock while their partitions have work, stay too
    assert twice["Lambda: scans: GB-seconds"].usd == pytest.approx(once["Lambda: scans: GB-seconds"].usd, rel=1e-3)


def test_nothing_to_do_leaves_only_the_lines_paid_at_rest(config: StageConfig, inputs: MeasuredInputs) -> None:
    lines = at_rest(config, inputs, PRICES)
    assert lines and all(line.at_rest for line in lines)
    items = _by_item(lines)
    # the results trigger's minimum poller is billed as a whole event poller unit all month
    assert items["Lambda: results trigger: provisioned pollers"].usd == pytest.approx(720 * 0.185)
    assert items["MSK Serverless: cluster-hours"].usd == pytest.approx(720 * 0.75)
    assert "Keyspaces: writes" not in items


def test_point_in_time_recovery_adds_its_line(config: StageConfig, inputs: MeasuredInputs) -> None:
    load_ = Load(executions_per_day=50e6)
    on = _by_item(monthly_lines(config, inputs, PRICES, load_))
    off = _by_item(monthly_lines(config.model_copy(update={"pitr_tables": ()}), inputs, PRICES, load_))
    line = "Keyspaces: point-in-time recovery of the rows that expire"
    assert line in on and line not in off
    assert total(list(on.values())) - total(list(off.values())) == pytest.approx(
        on[line].usd + on["Keyspaces: one-time job rows while they live"].usd
        * PRICES.keyspaces_pitr.value / (PRICES.keyspaces_storage.value + PRICES.keyspaces_pitr.value))
    assert on["Keyspaces: storage of the rows that expire"].usd == off["Keyspaces: storage of the rows that expire"].usd


def test_a_stage_with_a_web_acl_pays_for_it_and_every_api_request_it_inspects(
        config: StageConfig, inputs: MeasuredInputs) -> None:
    assert not config.web_acl and StageConfig.from_cdk_json(CDK_JSON, "prod").web_acl  # waf_rate_limit "auto"
    load_ = Load(executions_per_day=50e6, submit="single")
    on = _by_item(monthly_lines(config.model_copy(update={"web_acl": True}), inputs, PRICES, load_))
    off = _by_item(monthly_lines(config, inputs, PRICES, load_))
    assert not [item for item in off if item.startswith("AWS WAF")]
    assert on["AWS WAF: web ACL and its rate rule"].usd == pytest.approx(6.00)
    requests = on["API Gateway: REST requests (POST /jobs)"].usd / PRICES.api_gateway_rest_request.value
    assert on["AWS WAF: requests inspected"].usd == pytest.approx(requests * 0.60e-6)


def test_one_time_rows_that_never_expire_cost_their_storage_every_month(
        config: StageConfig, inputs: MeasuredInputs) -> None:
    # Given half the executions one-time, 600 B a job row (the issue's figures)
    inputs = _with(inputs, one_time_share=0.5, job_row_bytes=600)
    line = "Keyspaces: one-time job rows kept (this month's; +1 month's each month)"
    kept_stage = config.model_copy(update={"one_time_rows_expire": False})  # (the stage setting turned off)
    kept = _by_item(monthly_lines(kept_stage, inputs, PRICES, Load(executions_per_day=1e9)))[line]
    # Then a month's rows are 9 TB at 1 B a day, ≈ $0.135 per million executions a month (storage + PITR)
    assert kept.usd / (PRICES.keyspaces_storage.value + PRICES.keyspaces_pitr.value) == pytest.approx(9_000)
    assert per_million(kept.usd, 1e9) == pytest.approx(0.135)
    # And with the rows deleted after their last fire the line goes, and each row's TTL delete is paid once
    expiring = config.model_copy(update={"one_time_rows_expire": True})
    lines = _by_item(monthly_lines(expiring, inputs, PRICES, Load(executions_per_day=1e9)))
    assert line not in lines
    deletes = lines["Keyspaces: TTL deletes of one-time job rows"]
    assert per_million(deletes.usd, 1e9) == pytest.approx(0.5 * 0.275)
    # and each row's storage while it lives (its history's 30 days and a day and a half) and until Keyspaces purges
    # it (up to 10 days after it expired), the same every month
    live = lines["Keyspaces: one-time job rows while they live"]
    assert live.usd / kept.usd == pytest.approx((30 + 1.5 + 10) / 30)


def test_rows_that_expire_are_billed_until_keyspaces_purges_them(
        config: StageConfig, inputs: MeasuredInputs) -> None:
    # Given the history's rows kept 30 days, and Keyspaces purging expired rows up to 10 days later (its TTL page)
    assert inputs.history_ttl_days.value == 30 and inputs.history_purge_lag_days.value == 10
    load_ = Load(executions_per_day=50e6)
    lagging = _by_item(monthly_lines(config, inputs, PRICES, load_))
    purged_at_once = _by_item(monthly_lines(
        config, _with(inputs, history_purge_lag_days=0, ttl_purge_lag_days=0), PRICES, load_))
    # Then the history's storage, and its point-in-time recovery, are those of 40 days of rows, not 30
    for item in ("Keyspaces: storage of the rows that expire",
                 "Keyspaces: point-in-time recovery of the rows that expire"):
        assert lagging[item].usd / purged_at_once[item].usd == pytest.approx(40 / 30)
    # and a one-time job's row is billed 10 days more than it lives
    live = "Keyspaces: one-time job rows while they live"
    assert lagging[live].usd / purged_at_once[live].usd == pytest.approx((30 + 1.5 + 10) / (30 + 1.5))


def test_the_stage_setting_decides_whether_one_time_rows_expire() -> None:
    # (on by default: cdk.json's ``one_time_rows_expire``, read as the CDK app reads it)
    assert StageConfig.from_cdk_json(CDK_JSON).one_time_rows_expire
    assert StageConfig.from_cdk_json(CDK_JSON, "prod").one_time_rows_expire


def test_busy_scans_alone_cost_about_18_dollars_per_million_at_1_m_a_day(
        config: StageConfig, inputs: MeasuredInputs) -> None:
    assert busy_share(config, 1e6) == pytest.approx(1.0)
    scans = _by_item(monthly_lines(config, inputs, PRICES, Load(executions_per_day=1e6)))["Lambda: scans: GB-seconds"]
    assert per_million(scans.usd, 1e6) == pytest.approx(18.4, abs=0.1)


def test_provisioned_capacity_costs_less_than_on_demand_for_a_flat_load(
        config: StageConfig, inputs: MeasuredInputs) -> None:
    on_demand = total(monthly_lines(config, inputs, PRICES, Load(executions_per_day=50e6)))
    provisioned = total(monthly_lines(config, inputs, PRICES, Load(executions_per_day=50e6, capacity="provisioned")))
    assert provisioned < on_demand


def test_the_issue_s_today_figures_at_50_m_a_day(inputs: MeasuredInputs) -> None:
    # issue #33: ≈ $5.6 per million on-demand, ≈ $4 provisioned (one-time jobs submitted in batches), before the levers
    config = StageConfig()
    on_demand = per_million(total(monthly_lines(config, inputs, PRICES, Load(executions_per_day=50e6))), 50e6)
    provisioned = per_million(total(monthly_lines(
        config, inputs, PRICES, Load(executions_per_day=50e6, capacity="provisioned"))), 50e6)
    assert 5.0 < on_demand < 6.2
    assert 3.5 < provisioned < 4.5


def test_one_submit_per_request_adds_api_gateway_and_the_rate_limit(
        config: StageConfig, inputs: MeasuredInputs) -> None:
    batch = _by_item(monthly_lines(config, inputs, PRICES, Load(executions_per_day=50e6)))
    single = _by_item(monthly_lines(config, inputs, PRICES, Load(executions_per_day=50e6, submit="single")))
    assert per_million(single["API Gateway: REST requests (POST /jobs)"].usd, 50e6) == pytest.approx(
        inputs.one_time_share.value * 3.50)
    rate_limit = single["DynamoDB: the submit's rate limit"].usd
    assert per_million(rate_limit, 50e6) == pytest.approx(inputs.one_time_share.value * 0.625)
    assert rate_limit == pytest.approx(100 * batch["DynamoDB: the submit's rate limit"].usd)


def test_three_kafka_partitions_cap_the_results_below_a_busy_minute_at_50_m_a_day(
        config: StageConfig, inputs: MeasuredInputs) -> None:
    results = capacity_checks(config, inputs, 50e6)[0]
    assert results.capacity_per_second == pytest.approx(2_000, rel=0.01)
    assert results.needed_per_second > results.capacity_per_second


def test_the_stage_configuration_is_read_as_the_cdk_app_reads_it(tmp_path: Path) -> None:
    cdk = json.loads(CDK_JSON.read_text())
    cdk["context"]["stages"]["cheap"] = {"segments": 4, "kafka_provisioned": {}, "endpoint_zones": 1,
                                         "kafka_partitions": 6, "alarm_email": "ops@example.com"}
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(cdk))
    dev, cheap = StageConfig.from_cdk_json(path), StageConfig.from_cdk_json(path, "cheap")
    assert (dev.segments, dev.kafka_brokers, dev.endpoint_zones, dev.endpoints) == (16, None, 2, 6)
    assert (cheap.stage, cheap.segments, cheap.kafka_brokers, cheap.endpoint_zones, cheap.kafka_partitions) == (
        "cheap", 4, 2, 1, 6)
    bill = _by_item(at_rest(cheap, load(), PRICES))
    assert "MSK Serverless: cluster-hours" not in bill
    assert bill["MSK provisioned: brokers and storage"].usd == pytest.approx(2 * (720 * 0.0456 + 10 * 0.10))


def test_a_stage_without_point_in_time_recovery_is_priced_without_it(tmp_path: Path) -> None:
    # Given a stage that turns point-in-time recovery off on every table
    cdk = json.loads(CDK_JSON.read_text())
    cdk["context"]["stages"]["norecovery"] = {"point_in_time_recovery": [], "alarm_email": "ops@example.com"}
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(cdk))

    # Then the model prices no table's recovery (an empty list is not "every table")
    assert StageConfig.from_cdk_json(path, "norecovery").pitr_tables == ()


def test_every_price_and_input_says_where_it_came_from(inputs: MeasuredInputs) -> None:
    for name, price in PRICES:
        assert price.source and price.checked and price.region == "us-east-1", name
    for name, figure in inputs:
        assert figure.source, name
    # the issue's corrections: Keyspaces provisioned 15 % and TTL deletes 29 % below what the docs assumed
    assert 0.00075 / PRICES.keyspaces_wcu_hour.value == pytest.approx(1.15, abs=0.01)
    assert 0.355e-6 / PRICES.keyspaces_ttl_delete.value == pytest.approx(1.29, abs=0.01)


def test_a_bench_run_records_what_it_measured_and_keeps_the_derived_figures(tmp_path: Path) -> None:
    # Given the inputs file and a run's results (the sections the cost model reads)
    path = tmp_path / "cost_inputs.json"
    path.write_text(INPUTS_PATH.read_text())
    results = {
        "started": "2026-12-01 10:00 UTC",
        "drain": [{"seeded": 1000, "recurring": 400, "published": 1000, "process_cpu_s": 0.5,
                   "writes": {"per_execution": {"INSERT task_schedule_v2": 0.4}, "late_polls_per_scan": 50.0,
                              "dynamodb_per_scan": {"update_item": 30.0, "get_item": 1.0, "batch_get_item": 2.0}}}],
        "writes": [{"executions": 100, "driver": {"task_history_v2": 210},
                    "submit": {"one_time": {"job_table_v2": 1.0, "task_schedule_v2": 1.0},
                               "recurring": {"job_table_v2": 1.0, "task_schedule_v2": 1.0}},
                    "stored_bytes": {"history_row": {"median": 612.0, "min": 600, "max": 700, "count": 110},
                                     "one_time_job_row": {"median": 850.0, "min": 849, "max": 851, "count": 100}},
                    "result_message_bytes": {"median": 420.5, "min": 380, "max": 470, "count": 110}}],
        "idle": [{"scan_seconds_per_partition": 9.0, "invocations_per_partition": 2.5}],
        "message_bytes": 480,
    }
    # When the run records them
    names = record(results, path)
    # Then the measured figures take the run's values, with the run named
    after = load(path)
    assert set(names) == set(measured_from(results, "x"))
    assert after.one_time_share.value == pytest.approx(0.6)
    assert after.scan_cpu_ms.value == pytest.approx(0.5)
    assert after.history_rows_written.value == pytest.approx(2.1)
    assert after.lease_reads_per_busy_scan.value == pytest.approx(3.0)
    assert after.message_bytes.value == 480
    assert after.rows_per_one_time_submit.value == pytest.approx(2.0)  # counted on the submit path
    # the sizes: the rows read back and sized by Keyspaces' rules, the result messages as the worker sends them
    assert (after.history_bytes_stored.value, after.job_row_bytes.value) == (612.0, 850.0)
    assert after.result_message_bytes.value == pytest.approx(420.5)
    assert "calculating-row-size" in after.job_row_bytes.source
    assert "2026-12-01 10:00 UTC" in after.idle_scan_seconds_per_partition.source
    # And the derived ones stay as they were
    assert after.busy_scan_seconds == load().busy_scan_seconds
    assert all(getattr(after, name).kind == "measured" for name in names)


def test_a_writes_run_from_before_the_sizes_keeps_the_derived_sizes() -> None:
    # Given a writes run that measured no sizes (results of an older run), or that read back no row
    older = {"writes": [{"executions": 100, "driver": {"task_history_v2": 210}}]}
    empty = {"writes": [{"executions": 0, "driver": {},
                         "stored_bytes": {"history_row": {"median": 0.0, "min": 0.0, "max": 0.0, "count": 0}},
                         "result_message_bytes": {"median": 0.0, "min": 0.0, "max": 0.0, "count": 0}}]}
    # Then neither gives a size
    for results in (older, empty):
        assert not {"history_bytes_stored", "job_row_bytes", "result_message_bytes"} & set(measured_from(results, "x"))


def test_a_run_without_the_sections_records_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cost_inputs.json"
    path.write_text(INPUTS_PATH.read_text())
    assert record({"fairness": {}}, path) == []
    assert path.read_text() == INPUTS_PATH.read_text()


def test_per_million_counts_a_30_day_month() -> None:
    assert per_million(30.0, 1e6 / DAYS) == pytest.approx(30.0)


def test_the_cli_prints_the_tables_and_writes_the_docs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from bench.cost.__main__ import app

    runner = CliRunner()
    printed = runner.invoke(app, ["--stage", "dev", "--measured", str(INPUTS_PATH), "--detail", "50000000"])
    assert printed.exit_code == 0, printed.output
    assert "Dollars per million executions" in printed.output and "nothing to do" in printed.output
    assert "derived, not measured" in printed.output
    # Given a page whose marked table is stale
    page = tmp_path / "scaling.md"
    page.write_text("before\n<!-- cost:begin at-rest -->\nstale\n<!-- cost:end -->\nafter\n")
    # When the CLI writes the docs, then only the marked block changes
    written = runner.invoke(app, ["--write-docs", "--docs", str(page)])
    assert written.exit_code == 0, written.output
    text = page.read_text()
    assert "stale" not in text and "| **total a month (30 days)** |" in text
    assert text.startswith("before\n") and text.endswith("<!-- cost:end -->\nafter\n")
    again = runner.invoke(app, ["--write-docs", "--docs", str(page)])
    assert "already up to date" in again.output


def test_make_bench_records_the_inputs_only_for_the_published_report(tmp_path: Path) -> None:
    from bench.context import Options
    from bench.runner import _record_cost_inputs

    path = tmp_path / "cost_inputs.json"
    path.write_text(INPUTS_PATH.read_text())
    results = {"started": "2026-12-01 10:00 UTC",
               "idle": [{"scan_seconds_per_partition": 9.0, "invocations_per_partition": 2.5}]}
    # a run written elsewhere (the smoke test's) or a broken one leaves the inputs alone
    _record_cost_inputs(results, Options(out_md=tmp_path / "b.md"), path)
    _record_cost_inputs(results | {"failed": {"idle": "x"}}, Options(), path)
    assert path.read_text() == INPUTS_PATH.read_text()
    # the published report's run writes what it measured
    _record_cost_inputs(results, Options(), path)
    assert load(path).idle_scan_seconds_per_partition.value == 9.0


# The deployment levers (issue #33): each priced before and after

def test_a_stage_sized_for_its_rate_passes_the_limits_a_busy_minute_meets(inputs: MeasuredInputs) -> None:
    for executions in (1e6, 50e6, 1e9):
        sized = sized_for(StageConfig(), executions)
        for check in capacity_checks(sized, inputs, executions):
            assert check.capacity_per_second >= check.needed_per_second, (executions, check.limit)


def test_one_segment_at_1_m_a_day_cuts_the_scans_sixteenfold(inputs: MeasuredInputs) -> None:
    before = _by_item(monthly_lines(StageConfig(), inputs, PRICES, Load(executions_per_day=1e6)))
    after = _by_item(monthly_lines(sized_for(StageConfig(), 1e6), inputs, PRICES, Load(executions_per_day=1e6)))
    scans = "Lambda: scans: GB-seconds"
    assert after[scans].usd == pytest.approx(before[scans].usd / 16, rel=0.01)


def test_a_results_trigger_without_pollers_pays_nothing_at_rest(inputs: MeasuredInputs) -> None:
    line = "Lambda: results trigger: provisioned pollers"
    assert _by_item(at_rest(StageConfig(), inputs, PRICES))[line].usd == pytest.approx(720 * 0.185)
    assert line not in _by_item(at_rest(StageConfig(results_pollers=0), inputs, PRICES))


def test_sampled_logs_and_traces_cost_their_share(inputs: MeasuredInputs) -> None:
    load_ = Load(executions_per_day=50e6)
    before = _by_item(monthly_lines(StageConfig(), inputs, PRICES, load_))
    after = _by_item(monthly_lines(StageConfig(results_log_sample_rate=0.01, xray="sampled"), inputs, PRICES, load_))
    logs, traces = "CloudWatch Logs: ingestion and storage", "X-Ray: traces"
    line_usd = 50e6 * DAYS * inputs.results_log_bytes.value / 1e9 * (
        PRICES.logs_ingested_gb.value + PRICES.logs_stored_gb_month.value)
    assert before[logs].usd - after[logs].usd == pytest.approx(0.99 * line_usd)
    assert after[traces].usd < before[traces].usd
    off = _by_item(at_rest(StageConfig(xray="off", endpoints=5), inputs, PRICES))
    assert traces not in off


def test_point_in_time_recovery_follows_the_tables_named(inputs: MeasuredInputs) -> None:
    # (a one-time job never changed keeps no change-log entry: given one here, for job_changes to count)
    inputs = _with(inputs, change_log_bytes_per_one_time_job=350.0)
    load_ = Load(executions_per_day=50e6)
    line = "Keyspaces: point-in-time recovery of the rows that expire"
    history_only = _by_item(monthly_lines(StageConfig(pitr_tables=("task_history_v2",)), inputs, PRICES, load_))
    both = _by_item(monthly_lines(StageConfig(), inputs, PRICES, load_))
    assert 0 < history_only[line].usd < both[line].usd


def test_provisioned_capacity_bills_its_floor_at_rest(inputs: MeasuredInputs) -> None:
    stage = StageConfig(keyspaces_capacity="provisioned", expected_executions_per_day=50e6)
    writes = _by_item(at_rest(stage, inputs, PRICES, "provisioned"))["Keyspaces: writes"]
    assert writes.at_rest and writes.usd > 0
    assert "Keyspaces: writes" not in _by_item(at_rest(StageConfig(), inputs, PRICES, "provisioned"))


def test_each_stage_of_cdk_json_takes_the_cheaper_kafka_at_its_rate(inputs: MeasuredInputs) -> None:
    from bench.cost.model import kafka_options

    for name, stage in stages_of(CDK_JSON).items():
        if stage.expected_executions_per_day is None:
            continue
        options = kafka_options(stage, inputs, PRICES, stage.expected_executions_per_day,
                                production=name == "prod")
        cheaper = min(options, key=lambda kind: options[kind][1])
        assert (stage.kafka_brokers is not None) == (cheaper == "provisioned"), name


def test_the_small_tier_costs_at_most_150_dollars_a_month_at_rest(inputs: MeasuredInputs) -> None:
    small = stages_of(CDK_JSON)["small"]
    assert total(at_rest(small, inputs, PRICES)) <= 150
    assert per_million(total(monthly_lines(small, inputs, PRICES, Load(executions_per_day=1e6))), 1e6) <= 10


def test_a_stage_allowing_https_targets_pays_for_its_nat_gateways_and_their_bytes(
        tmp_path: Path, inputs: MeasuredInputs) -> None:
    # Given cdk.json with a stage allowing HTTPS targets, another (protected) one too, and one with Lambda only
    cdk = json.loads(CDK_JSON.read_text())
    cdk["context"]["stages"]["hooks"] = {"targets": {"kinds": ["https"]}, "alarm_email": "ops@example.com"}
    cdk["context"]["stages"]["prod"]["targets"] = {"kinds": ["https", "sqs"], "sqs_allow": ["123456789012"]}
    cdk["context"]["stages"]["functions"] = {"targets": {"kinds": ["lambda"], "lambda_allow": ["123456789012"]},
                                             "alarm_email": "ops@example.com"}
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(cdk))
    hooks, prod, functions = (StageConfig.from_cdk_json(path, stage) for stage in ("hooks", "prod", "functions"))

    # Then one NAT gateway, one per zone on the protected stage, none without HTTPS; and a topic more for each
    assert (hooks.nat_gateways, prod.nat_gateways, functions.nat_gateways) == (1, 2, 0)
    assert hooks.topics == StageConfig.from_cdk_json(path).topics + 1 == functions.topics
    # And the gateways are paid at rest, the bytes per execution
    load_ = Load(executions_per_day=1e6)
    bill = _by_item(monthly_lines(hooks, inputs, PRICES, load_))
    gateways = bill["NAT gateway: gateway-hours and their public IPv4 addresses"]
    assert gateways.at_rest and gateways.usd == pytest.approx(720 * (0.045 + 0.005))
    assert bill["NAT gateway: data processed (HTTPS deliveries)"].usd == pytest.approx(30e6 * 8_000 / 1e9 * 0.045)
    assert _by_item(at_rest(prod, inputs, PRICES))[
        "NAT gateway: gateway-hours and their public IPv4 addresses"].usd == pytest.approx(2 * 720 * 0.05)
    assert not [item for item in _by_item(monthly_lines(functions, inputs, PRICES, load_)) if item.startswith("NAT")]


# -- the delivery function (issue 35) ----------------------------------------------------------------------

DELIVERY_LINES = ("Lambda: delivery function", "Lambda: delivery trigger: provisioned pollers",
                  "CloudWatch Logs: the delivery function's lines", "X-Ray: the delivery function's traces",
                  "CloudWatch: the delivery's metrics and alarms")


def test_a_stage_with_targets_reads_them_and_the_delivery_functions_memory_from_the_app(tmp_path: Path) -> None:
    from infra.constructs.delivery import MEMORY_MB

    cdk = json.loads(CDK_JSON.read_text())
    cdk["context"]["stages"]["hooks"] = {"targets": {"kinds": ["https"]}, "alarm_email": "ops@example.com"}
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(cdk))
    hooks, dev = StageConfig.from_cdk_json(path, "hooks"), StageConfig.from_cdk_json(path)
    assert (hooks.targets, dev.targets) == (True, False)
    assert hooks.delivery_memory_mb == MEMORY_MB == 512


def test_the_delivery_function_is_priced_per_delivery_and_its_trigger_at_rest(inputs: MeasuredInputs) -> None:
    # Given a stage with targets (3 partitions, a provisioned poller, every function traced) at 1 M deliveries a day
    stage = StageConfig(targets=True, nat_gateways=1, topics=4, xray="active")
    bill = _by_item(monthly_lines(stage, inputs, PRICES, Load(executions_per_day=1e6)))
    # Then each invocation takes a batch of a partition's second and lasts its slowest call plus its own work
    batch = 1e6 / 86_400 / 3
    invocations = 30e6 / batch
    gb_s = invocations * (0.3 + 0.05) * 512 / 1024
    assert bill["Lambda: delivery function"].usd == pytest.approx(gb_s * 0.0000133334 + invocations * 0.2e-6)
    assert not bill["Lambda: delivery function"].at_rest
    # and its lines, a line per delivery and the platform's per invocation, kept 30 days
    log_gb = (30e6 * 640 + invocations * 700) / 1e9
    assert bill["CloudWatch Logs: the delivery function's lines"].usd == pytest.approx(log_gb * (0.5 + 0.03))
    assert bill["X-Ray: the delivery function's traces"].usd > 0
    # And at rest: its trigger's poller shares the results trigger's EPU (one poller group), so only its metrics and
    # alarms cost anything
    rest = _by_item(at_rest(stage, inputs, PRICES))
    assert rest["Lambda: results trigger: provisioned pollers"].usd == pytest.approx(720 * 0.185)
    assert "Lambda: delivery trigger: provisioned pollers" not in rest  # (a line of no cost is left out)
    assert rest["CloudWatch: the delivery's metrics and alarms"].usd == pytest.approx(4 * 0.30 + 7 * 0.10)
    assert "Lambda: delivery function" not in rest


def test_a_stage_without_targets_pays_nothing_for_deliveries(config: StageConfig, inputs: MeasuredInputs) -> None:
    assert not config.targets
    for executions in (0.0, 1e6, 1e9):
        bill = _by_item(monthly_lines(config, inputs, PRICES, Load(executions_per_day=executions)))
        assert not set(DELIVERY_LINES) & set(bill)
        assert not [item for item in bill if item.startswith("NAT")]


def test_the_deliveries_table_shows_what_targets_add_per_million_and_at_rest(
        config: StageConfig, inputs: MeasuredInputs) -> None:
    from bench.cost.tables import deliveries_table

    table = deliveries_table(config, inputs, PRICES)
    rows = {row[0]: row[1:] for row in table.rows}
    # Every line a delivery adds is there, with the results path it shares with a worker's execution
    for line in ("Lambda: delivery function",
                 "CloudWatch Logs: the delivery function's lines", "NAT gateway: data processed (HTTPS deliveries)",
                 "NAT gateway: gateway-hours and their public IPv4 addresses", "MSK Serverless: partition-hours",
                 "Lambda: results function (its result, as a worker's)"):
        assert line in rows, line
    # The NAT gateway's bytes: 8 KB a delivery at $0.045 a GB, whatever the load
    assert rows["NAT gateway: data processed (HTTPS deliveries)"][:2] == ["$0.36", "$0.36"]
    # At rest: one NAT gateway and its address, the topic's partitions; the delivery trigger's poller shares the
    # results trigger's EPU (one poller group), so it adds nothing at any of these loads
    assert rows["NAT gateway: gateway-hours and their public IPv4 addresses"][2] == "$36.00"
    assert "Lambda: delivery trigger: provisioned pollers" not in rows
    assert rows["MSK Serverless: partition-hours"][2] == "$3.24"
    # and the stage's figures without targets are those of the other tables
    dev_rest = total(at_rest(config, inputs, PRICES, config.keyspaces_capacity))
    added = float(rows["what targets add"][2].strip("$").replace(",", ""))
    whole = float(rows["a delivered execution, all in (the stage's whole bill)"][2].strip("$").replace(",", ""))
    assert whole == pytest.approx(dev_rest + added, abs=1)


def test_the_delivery_trigger_pays_an_epu_of_its_own_only_beyond_what_the_results_trigger_leaves(
        inputs: MeasuredInputs) -> None:
    # Given a stage with targets whose triggers may take 8 pollers each: together 16, two EPUs of ten pollers
    stage = StageConfig(targets=True, nat_gateways=1, topics=4, kafka_partitions=8, results_pollers=8)
    busy = _by_item(monthly_lines(stage, inputs, PRICES, Load(executions_per_day=1e9)))
    assert busy["Lambda: results trigger: provisioned pollers"].usd == pytest.approx(720 * 0.185)
    assert busy["Lambda: delivery trigger: provisioned pollers"].usd == pytest.approx(720 * 0.185)
    # and at rest one poller each: one EPU for the two
    rest = _by_item(at_rest(stage, inputs, PRICES))
    assert "Lambda: delivery trigger: provisioned pollers" not in rest  # (a line of no cost is left out)
