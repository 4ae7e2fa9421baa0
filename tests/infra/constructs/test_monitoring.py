from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Match, Template

from infra.constructs.monitoring import Monitoring

if TYPE_CHECKING:
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
        rest_api=api, results=functions["results"], alarm_email="ops@example.com",
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
                              "5XXError", "Errors", "OffsetLag"])
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
