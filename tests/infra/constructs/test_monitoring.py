from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Match, Template

from infra.constructs.monitoring import Monitoring
from infra.runbooks import RUNBOOKS_MD, anchors

ROOT = Path(__file__).resolve().parents[3]
RUNBOOKS = "https://example.com/jobrunner/docs/runbooks.md"

if TYPE_CHECKING:
    from collections.abc import Callable

    import aws_cdk as cdk


def _function(stack: cdk.Stack, name: str) -> lambda_.IFunction:
    return lambda_.Function.from_function_name(stack, name, f"fn-{name}")


@pytest.fixture
def template(stack: cdk.Stack) -> Template:
    api = apigw.RestApi(stack, "Api")
    api.root.add_method("GET")
    functions = {n: _function(stack, n) for n in ("api", "tick", "scan", "results")}
    Monitoring(
        stack, "Mon", dashboard_name="jobrunner-test", tick=functions["tick"], scan=functions["scan"],
        functions=functions, failure_queues={"TickDeadLetters": sqs.Queue(stack, "Q1"),
                                             "ScanFailedInvocations": sqs.Queue(stack, "Q2")},
        rest_api=api, results=functions["results"], alarm_email="ops@example.com", runbooks=RUNBOOKS,
    )
    return Template.from_stack(stack)


def _alarms(template: Template) -> dict[str, dict[str, Any]]:
    return {a["Properties"]["AlarmDescription"]: a["Properties"]
            for a in template.find_resources("AWS::CloudWatch::Alarm").values()}


def test_watermark_lag_alarm(template: Template) -> None:
    (lag,) = [a for a in _alarms(template).values() if a.get("MetricName") == "WatermarkLagSeconds"]

    assert lag["Namespace"] == "JobRunner"
    assert lag["Dimensions"] == [{"Name": "service", "Value": "jobrunner"}]
    assert (lag["Threshold"], lag["ComparisonOperator"]) == (120, "GreaterThanThreshold")
    assert lag["EvaluationPeriods"] == 3 and lag["Period"] == 60
    assert lag["TreatMissingData"] == "breaching"


def test_parked_partitions_alarm(template: Template) -> None:
    # A partition whose scans failed again and again is set aside (retried with backoff): someone must look
    (parked,) = [a for a in _alarms(template).values() if a.get("MetricName") == "ParkedPartitions"]

    assert (parked["Namespace"], parked["Dimensions"]) == ("JobRunner", [{"Name": "service", "Value": "jobrunner"}])
    assert (parked["Statistic"], parked["Period"], parked["EvaluationPeriods"]) == ("Maximum", 300, 1)
    assert (parked["Threshold"], parked["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert parked["TreatMissingData"] == "notBreaching"  # a tick that stops reporting has its own alarm


def test_every_failure_path_has_an_alarm_that_notifies(template: Template) -> None:
    alarms = _alarms(template).values()

    metrics = sorted(a.get("MetricName", "") for a in alarms)
    assert metrics == sorted(["WatermarkLagSeconds", "ParkedPartitions", "Invocations", "Errors",
                              "ApproximateNumberOfMessagesVisible", "ApproximateNumberOfMessagesVisible", "DeadLetters",
                              "LateRowsBehindWindow",
                              "5XXError", "Errors", "OffsetLag", "Results_refused_token",
                              # scan throttles, event age, dropped events; API p99, 5xx and 4xx rates (math: "")
                              "Throttles", "AsyncEventAge", "AsyncEventsDropped", "Latency", "", ""])
    (topic,) = template.find_resources("AWS::SNS::Topic")
    assert all(a["AlarmActions"] == [{"Ref": topic}] == a["OKActions"] for a in alarms)
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"})
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_dashboard_draws_the_application_metrics(template: Template) -> None:
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])

    for metric in ("ExecutionsPublished", "MaxLatenessMs", "ScansDispatched", "WatermarkLagSeconds", "Retries",
                   "DeadLetters", "ConcurrentExecutions", "ParkedPartitions", "HeartbeatUnavailableSegments"):
        assert metric in body
    assert "SEARCH(" in body
    assert dashboard["Properties"]["DashboardName"] == "jobrunner-test"


def test_cloudwatch_may_publish_to_the_tls_only_alarm_topic(template: Template) -> None:
    # Given the topic policy enforce_ssl writes (it replaces SNS's default policy)
    (policy,) = template.find_resources("AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]

    # Then it still denies plain HTTP, and allows CloudWatch alarms of this account to publish
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
               for s in statements)
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert allow["Action"] == "sns:Publish"
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert ":alarm:*" in json.dumps(allow["Condition"]["ArnLike"]["aws:SourceArn"])


def test_results_trigger_lag_alarm(template: Template) -> None:
    # A partition of job-results stalled behind a failing batch shows as offset lag
    (lag,) = [a for a in _alarms(template).values() if a.get("MetricName") == "OffsetLag"]

    assert lag["Namespace"] == "AWS/Lambda"
    (dimension,) = lag["Dimensions"]
    assert dimension["Name"] == "FunctionName" and "fn-results" in json.dumps(dimension["Value"])
    assert (lag["Statistic"], lag["Period"], lag["EvaluationPeriods"]) == ("Maximum", 300, 3)
    assert (lag["Threshold"], lag["ComparisonOperator"]) == (1000, "GreaterThanThreshold")


def test_lateness_percentiles_are_taken_over_every_execution_not_per_scan_maxima(template: Template) -> None:
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.loads(json.dumps(dashboard["Properties"]["DashboardBody"]))
    text = "".join(p if isinstance(p, str) else "?" for p in body["Fn::Join"][1])
    (widget,) = [w for w in json.loads(text)["widgets"]
                 if w["properties"].get("title") == "Lateness after the due instant (ms)"]

    series = {(m[1], m[-1]["stat"]) for m in widget["properties"]["metrics"]}
    assert series == {("LatenessMs", "p50"), ("LatenessMs", "p99"), ("MaxLatenessMs", "Maximum")}


@pytest.fixture
def full(stack: cdk.Stack) -> Template:
    from aws_cdk import aws_dynamodb as dynamodb

    api = apigw.RestApi(stack, "Api")
    api.root.add_method("GET")
    functions = {n: _function(stack, n) for n in ("api", "tick", "scan")}
    table = dynamodb.Table(stack, "Heartbeats", partition_key=dynamodb.Attribute(
        name="segment", type=dynamodb.AttributeType.NUMBER))
    Monitoring(stack, "Mon", dashboard_name="d", tick=functions["tick"], scan=functions["scan"], functions=functions,
               failure_queues={"ScanFailedInvocations": sqs.Queue(stack, "Q"),
                               "DeliveryFailedBatches": sqs.Queue(stack, "QD")}, rest_api=api,
               reconciler=_function(stack, "reconcile"),
               delivery=_function(stack, "delivery"), delivery_timeout=Duration.seconds(144),
               heartbeat_table=table, keyspace="jobrunner_prod", scan_reserved_concurrency=36,
               monthly_budget_usd=1500, budget_name="jobrunner-prod",
               runbooks=RUNBOOKS)
    return Template.from_stack(stack)


def _by_runbook(template: Template) -> dict[str, dict[str, Any]]:
    return {a["AlarmDescription"].rsplit("#", 1)[1]: a for a in _alarms(template).values()}


def test_every_alarm_links_its_runbook_and_the_runbook_exists(full: Template) -> None:
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    anchors = {line[3:].strip().lower() for line in runbooks.splitlines() if line.startswith("## ")}

    alarms = _by_runbook(full)

    assert all(a["AlarmDescription"].split("Runbook: ")[1].startswith("https://example.com/jobrunner/docs/runbooks.md#")
               for a in alarms.values())
    assert set(alarms) <= anchors, set(alarms) - anchors
    # every alarm of the whole stack, results included
    assert {"resultsoffsetlag", "resultserrors", "resultsfailedbatchesqueued", "tickdeadlettersqueued",
            "budget"} <= anchors
    # and the delivery function's (a stage with targets)
    assert {"deliveryerrors", "deliveryfailures", "deliveryduration", "deliveryoffsetlag",
            "deliveryfailedbatchesqueued"} <= set(alarms)


def test_delivery_failures_are_a_share_of_the_deliveries_and_latency_is_duration_and_lag(full: Template) -> None:
    alarms = _by_runbook(full)

    assert (alarms["deliveryerrors"]["MetricName"], alarms["deliveryerrors"]["Threshold"]) == ("Errors", 1)
    failures = alarms["deliveryfailures"]
    (expression,) = [m["Expression"] for m in failures["Metrics"] if "Expression" in m]
    names = {m["MetricStat"]["Metric"]["MetricName"] for m in failures["Metrics"] if "MetricStat" in m}
    assert names == {"Deliveries_delivered", "Deliveries_failed_retryable", "Deliveries_failed_permanent",
                     "Deliveries_not_attempted_out_of_time"}
    assert expression.startswith("IF(") and ">= 20" in expression
    assert (failures["Threshold"], failures["EvaluationPeriods"]) == (25, 3)
    duration = alarms["deliveryduration"]
    assert (duration["MetricName"], duration["ExtendedStatistic"], duration["Threshold"]) == (
        "Duration", "p99", 0.8 * 144_000)
    body = json.dumps(full.find_resources("AWS::CloudWatch::Dashboard"))
    assert "Deliveries per minute, by outcome" in body and "Deliveries_failed_permanent" in body
    lag = alarms["deliveryoffsetlag"]
    assert (lag["MetricName"], lag["Threshold"]) == ("OffsetLag", 500)
    assert "fn-delivery" in json.dumps(lag["Dimensions"])


def test_scan_throttles_event_age_dropped_events_and_concurrency_near_the_reservation(full: Template) -> None:
    alarms = _by_runbook(full)

    assert (alarms["scanthrottles"]["MetricName"], alarms["scanthrottles"]["Threshold"]) == ("Throttles", 1)
    age = alarms["scaneventage"]
    assert (age["Namespace"], age["MetricName"], age["Statistic"]) == ("AWS/Lambda", "AsyncEventAge", "Maximum")
    assert (age["Threshold"], age["EvaluationPeriods"]) == (60_000, 3)
    assert alarms["scaneventsdropped"]["MetricName"] == "AsyncEventsDropped"
    near = alarms["scanconcurrencynearreservation"]
    assert (near["MetricName"], near["Statistic"], near["Threshold"]) == ("ConcurrentExecutions", "Maximum", 28)


def test_keyspaces_and_dynamodb_throttling(full: Template) -> None:
    alarms = _by_runbook(full)

    for name, metric in (("keyspaceswritethrottles", "WriteThrottleEvents"),
                         ("keyspacesreadthrottles", "ReadThrottleEvents"),
                         ("keyspacespartitionthrottles", "StoragePartitionThroughputCapacityExceeded")):
        (query,) = alarms[name]["Metrics"]
        assert query["Expression"] == (f'SELECT SUM({metric}) FROM "AWS/Cassandra" '
                                       "WHERE Keyspace = 'jobrunner_prod'")
    metrics = {m["Id"]: m for m in alarms["heartbeatthrottles"]["Metrics"]}
    assert metrics["expr_1"]["Expression"] == "reads + writes"
    assert {metrics[k]["MetricStat"]["Metric"]["MetricName"] for k in ("reads", "writes")} == {
        "ReadThrottleEvents", "WriteThrottleEvents"}


def test_api_p99_latency_and_error_rates(full: Template) -> None:
    alarms = _by_runbook(full)

    p99 = alarms["apilatencyp99"]
    assert (p99["MetricName"], p99["ExtendedStatistic"], p99["Threshold"]) == ("Latency", "p99", 2000)
    for name, metric, threshold in (("api5xxrate", "5XXError", 1), ("api4xxrate", "4XXError", 10)):
        metrics = {m["Id"]: m for m in alarms[name]["Metrics"]}
        assert metrics["expr_1"]["Expression"] == "IF(requests >= 20, 100 * errors / requests, 0)"
        assert metrics["errors"]["MetricStat"]["Metric"]["MetricName"] == metric
        assert alarms[name]["Threshold"] == threshold


def test_a_monthly_budget_notifies_the_alarm_topic_which_lets_budgets_publish(full: Template) -> None:
    (topic,) = full.find_resources("AWS::SNS::Topic")
    full.has_resource_properties("AWS::Budgets::Budget", {
        "Budget": {"BudgetName": "jobrunner-prod", "BudgetType": "COST", "TimeUnit": "MONTHLY",
                   "BudgetLimit": {"Amount": 1500, "Unit": "USD"}},
        "NotificationsWithSubscribers": [
            {"Notification": Match.object_like({"NotificationType": kind, "Threshold": percent}),
             "Subscribers": [{"SubscriptionType": "SNS", "Address": {"Ref": topic}}]}
            for kind, percent in (("ACTUAL", 80), ("FORECASTED", 100))],
    })
    full.has_resource_properties("AWS::SNS::TopicPolicy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Sid": "BudgetsPublish", "Principal": {"Service": "budgets.amazonaws.com"}})])}})
    full.has_resource_properties("AWS::KMS::Key", {"KeyPolicy": {"Statement": Match.array_with([
        Match.object_like({"Principal": {"Service": "budgets.amazonaws.com"}})])}})


def test_any_repair_by_the_reconciler_raises_an_alarm_linked_to_its_runbook(full: Template) -> None:
    # In a healthy system the reconciler repairs nothing: one repair is a bug report
    reconciled = _by_runbook(full)["reconciled"]

    assert (reconciled["MetricName"], reconciled["Namespace"]) == ("Reconciled", "JobRunner")
    assert reconciled["Dimensions"] == [{"Name": "service", "Value": "jobrunner"}]
    assert (reconciled["Statistic"], reconciled["Period"], reconciled["EvaluationPeriods"]) == ("Sum", 300, 1)
    assert (reconciled["Threshold"], reconciled["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert reconciled["TreatMissingData"] == "notBreaching"
    body = json.dumps(full.find_resources("AWS::CloudWatch::Dashboard"))
    assert "Reconciled" in body and "reason" in body


def test_a_runbook_link_that_is_not_an_https_url_is_refused(stack: cdk.Stack) -> None:
    # Given the old default: a path in the checkout, which no mail reader opens
    with pytest.raises(ValueError, match="https URL"):
        Monitoring(stack, "Mon", dashboard_name="d", tick=_function(stack, "tick"), scan=_function(stack, "scan"),
                   functions={}, failure_queues={}, runbooks="docs/runbooks.md")


def _descriptions(template: dict[str, Any]) -> dict[str, str]:
    """Each alarm's description, its tokens written as ``<logical id.attribute>``."""
    def text(value: Any) -> str:
        if isinstance(value, str):
            return value
        if "Fn::Join" in value:
            return "".join(text(part) for part in value["Fn::Join"][1])
        (resource, attribute) = value["Fn::GetAtt"]
        return f"<{resource}.{attribute}>"

    return {name: text(r["Properties"]["AlarmDescription"]) for name, r in template["Resources"].items()
            if r["Type"] == "AWS::CloudWatch::Alarm"}


def test_every_alarm_of_the_default_stage_links_its_runbook_served_by_the_stack(
    stack_template: Callable[..., dict[str, Any]],
) -> None:
    # Given the stage cdk.json deploys by default, no runbook_url set
    template = stack_template()
    (distribution,) = [n for n, r in template["Resources"].items() if r["Type"] == "AWS::CloudFront::Distribution"]

    descriptions = _descriptions(template)

    # Then each alarm's e-mail carries an https link to its section of the page the web dashboard serves
    known = anchors(RUNBOOKS_MD.read_text())
    links = {name: d.split("Runbook: ", 1)[1] for name, d in descriptions.items()}
    assert len(links) >= 20
    prefix = f"https://<{distribution}.DomainName>/ui/runbooks#"
    assert {name: link for name, link in links.items() if not link.startswith(prefix)} == {}
    assert {link.removeprefix(prefix) for link in links.values()} <= known


def test_a_stage_may_link_its_own_copy_of_the_runbooks(stack_template: Callable[..., dict[str, Any]]) -> None:
    # Given a stage without the web dashboard, linking the runbooks in its repository
    url = "https://github.com/acme/jobrunner/blob/main/docs/runbooks.md"
    template = stack_template(web_dashboard=False, runbook_url=url)

    links = [d.split("Runbook: ", 1)[1] for d in _descriptions(template).values()]

    assert links and all(link.startswith(f"{url}#") for link in links)
    assert {link.split("#", 1)[1] for link in links} <= anchors(RUNBOOKS_MD.read_text())
