"""Dashboard and alarms.

Application metrics come from Powertools (EMF) in namespace ``JobRunner`` with the dimension
``service=jobrunner`` (``jobrunner.observability``): ``ExecutionsPublished``, ``LatenessMs`` (a
sample of each scan's executions: the percentiles), ``MaxLatenessMs`` (each scan's worst: the maximum),
``ScansDispatched`` today; ``Retries``, ``DeadLetters`` and ``WatermarkLagSeconds`` (the tick: the
largest lag of any segment's watermark behind the current minute, in seconds) as they are added;
``ParkedPartitions`` and ``HeartbeatUnavailableSegments`` (the tick: partitions whose scans failed
again and again, set aside and retried with backoff until done; segments whose heartbeat reads or
writes failed on that tick). A per-segment lag (the same metric with a ``segment`` dimension too) is
drawn when it exists.

Alarms notify an SNS topic (encrypted with a key CloudWatch may use; an email subscription when
``alarm_email`` is set):
- watermark more than 2 minutes behind for 3 minutes, or no lag reported at all (tick not running);
- a partition parked (its scans failed ``park_after`` times: an execution waits, retried with backoff);
- the tick not invoked for 5 minutes; scan function errors; failed scan or tick events in their queues;
- executions dead-lettered (``DeadLetters``); API 5xx responses; results function errors; results
  refused for a missing or wrong result token (``Results_refused_token``);
- scan throttles, scan events waiting too long in Lambda's async queue or dropped from it;
- Keyspaces throttling (table capacity, hot partitions) and heartbeat table (DynamoDB) throttling;
- the API's p99 latency, its 5xx and 4xx rates; scan concurrency near its reservation;
- any execution the reconciler had to repair (``Reconciled``, also by ``reason``): in a healthy system it is 0, so
  each repair is a bug report;
- and, outside CloudWatch, a monthly AWS Budgets cost budget notifying the same topic.
Each alarm's description ends with the link to its runbook: ``Runbook: <runbooks>#<alarm name, lowercased>``, an
absolute https URL of the rendered ``docs/runbooks.md`` (one section per alarm), so that the alarm's e-mail
carries a link a person can open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Aws, Duration, Token
from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

if TYPE_CHECKING:
    from collections.abc import Mapping

    from aws_cdk import aws_apigateway as apigw
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_sqs as sqs

NAMESPACE = "JobRunner"
SERVICE = "jobrunner"
MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
#: The watermark may trail the current minute by one bucket in normal operation; two is trouble.
WATERMARK_LAG_ALARM_SECONDS = 120
#: Records the results trigger may trail ``job-results`` by before it is trouble (a few batches).
RESULTS_LAG_ALARM_RECORDS = 1000
#: A scan event older than this has lost its minute's head start (the tick dispatches up to a minute ahead).
SCAN_EVENT_AGE_ALARM_MS = 60_000
#: API p99 latency worth a look (ms), over 15 minutes; the api function answers in ~150 ms when warm.
API_P99_ALARM_MS = 2_000
#: API error rates (% of requests over 5 minutes, once there are at least API_RATE_MIN_REQUESTS).
API_5XX_RATE_ALARM = 1
API_4XX_RATE_ALARM = 10
API_RATE_MIN_REQUESTS = 20
#: Deliveries that failed (retryable, permanent, or not attempted for lack of time), as a share (%) of those made
#: over 15 minutes, once there are at least DELIVERY_RATE_MIN: one tenant's broken endpoint is its own business,
#: a share this high is more likely the delivery's (its network path, its grants, a secret it cannot read).
DELIVERY_FAILURE_RATE_ALARM = 25
DELIVERY_RATE_MIN = 20
DELIVERY_FAILURES = ("Deliveries_failed_retryable", "Deliveries_failed_permanent",
                     "Deliveries_not_attempted_out_of_time")
#: A delivery batch's p99 duration as a share of the function's timeout: slow endpoints hold the batches.
DELIVERY_DURATION_ALARM_SHARE = 0.8
#: Records behind the end of job-deliveries (worst partition), for 15 minutes: deliveries are late.
DELIVERY_LAG_ALARM_RECORDS = 500
#: Scan concurrency near its reservation (share of ``reserved_concurrency``): throttling is next.
CONCURRENCY_ALARM_SHARE = 0.8
#: Keyspaces' throttling metrics (AWS/Cassandra), each summed over the keyspace's tables.
KEYSPACES_THROTTLES = {
    "KeyspacesWriteThrottles": "WriteThrottleEvents",
    "KeyspacesReadThrottles": "ReadThrottleEvents",
    "KeyspacesPartitionThrottles": "StoragePartitionThroughputCapacityExceeded",
}


def lambda_metric(function: lambda_.IFunction, name: str, statistic: str, period: Duration = MINUTE) -> cw.Metric:
    return cw.Metric(namespace="AWS/Lambda", metric_name=name, dimensions_map={"FunctionName": function.function_name},
                     statistic=statistic, period=period)


def results_offset_lag(results: lambda_.IFunction) -> cw.Metric:
    """Lambda's ``OffsetLag`` of the function's Kafka trigger: records behind the topic's end (worst partition)."""
    return cw.Metric(namespace="AWS/Lambda", metric_name="OffsetLag",
                     dimensions_map={"FunctionName": results.function_name}, statistic="Maximum",
                     period=FIVE_MINUTES)


def app_metric(name: str, statistic: str, period: Duration = MINUTE, label: str | None = None) -> cw.Metric:
    return cw.Metric(namespace=NAMESPACE, metric_name=name, dimensions_map={"service": SERVICE},
                     statistic=statistic, period=period, label=label)


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        tick: lambda_.IFunction,
        scan: lambda_.IFunction,
        functions: Mapping[str, lambda_.IFunction],
        failure_queues: Mapping[str, sqs.IQueue],
        runbooks: str,
        rest_api: apigw.RestApi | None = None,
        results: lambda_.IFunction | None = None,
        reconciler: lambda_.IFunction | None = None,
        alarm_email: str | None = None,
        heartbeat_table: dynamodb.ITable | None = None,
        keyspace: str | None = None,
        scan_reserved_concurrency: int | None = None,
        monthly_budget_usd: int | None = None,
        budget_name: str | None = None,
        delivery: lambda_.IFunction | None = None,
        delivery_timeout: Duration | None = None,
    ) -> None:
        """``runbooks``: the https URL of the rendered ``docs/runbooks.md`` (a token, such as the web dashboard's
        ``runbooks_url``, is taken as one); each alarm links ``<runbooks>#<alarm name, lowercased>``."""
        super().__init__(scope, construct_id)
        if not Token.is_unresolved(runbooks) and not runbooks.startswith("https://"):
            raise ValueError(f"runbooks: expected the https URL of the runbooks page, got {runbooks!r}")
        self.runbooks = runbooks
        self.topic = self._alarm_topic(budgets_publish=bool(monthly_budget_usd), alarm_email=alarm_email)
        self.alarms: dict[str, cw.Alarm] = {}
        self._pipeline_alarms(tick, scan, failure_queues)
        if rest_api is not None:
            self._alarm("Api5xx", rest_api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"), 5,
                        description="The API answered 5xx.")
        if results is not None:
            self._results_alarms(results)
        if delivery is not None and delivery_timeout is not None:
            self._delivery_alarms(delivery, delivery_timeout)
        if reconciler is not None:
            self._alarm("Reconciled", app_metric("Reconciled", "Sum", FIVE_MINUTES), 1,
                        description="The reconciler re-planned executions it found lost (a row, a retry's row or a "
                                    "held row gone): each one is a bug report; find the cause in its log lines.")
        self._scan_alarms(scan, scan_reserved_concurrency)
        if rest_api is not None:
            self._api_alarms(rest_api)
        if keyspace is not None:
            self._keyspaces_alarms(keyspace)
        if heartbeat_table is not None:
            self._heartbeat_alarms(heartbeat_table)
        if monthly_budget_usd:
            self.budget = self._budget(monthly_budget_usd, budget_name)
        self.dashboard = self._dashboard(dashboard_name, scan, functions, failure_queues, rest_api, results)
        if reconciler is not None:
            self.dashboard.add_widgets(self._reconciler_widget())
        if delivery is not None:
            self.dashboard.add_widgets(*self._delivery_widgets(delivery))

    def _alarm_topic(self, *, budgets_publish: bool, alarm_email: str | None) -> sns.Topic:
        """The SNS topic every alarm notifies (and the cost budget, with ``budgets_publish``), under a key of its
        own that CloudWatch (and Budgets) may use."""
        key = kms.Key(self, "AlarmTopicKey", enable_key_rotation=True,
                      description="Job runner alarm notifications (CloudWatch publishes to the topic)")
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        if budgets_publish:
            key.grant(iam.ServicePrincipal("budgets.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        topic = sns.Topic(self, "AlarmTopic", master_key=key, enforce_ssl=True, display_name="Job runner alarms")
        # enforce_ssl writes a topic policy (a Deny without TLS), which replaces SNS's default policy:
        # without this Allow, CloudWatch may not publish and no alarm reaches the topic.
        topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={
                "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                "ArnLike": {"aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"},
            },
        ))
        if budgets_publish:
            topic.add_to_resource_policy(iam.PolicyStatement(
                sid="BudgetsPublish",
                principals=[iam.ServicePrincipal("budgets.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": f"arn:{Aws.PARTITION}:budgets::{Aws.ACCOUNT_ID}:*"},
                },
            ))
        if alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        return topic

    def _pipeline_alarms(self, tick: lambda_.IFunction, scan: lambda_.IFunction,
                         failure_queues: Mapping[str, sqs.IQueue]) -> None:
        """The scheduling pipeline: the watermark, parked partitions, the tick, scan errors, failed events and
        dead letters."""
        self._alarm("WatermarkLag", app_metric("WatermarkLagSeconds", "Maximum"), WATERMARK_LAG_ALARM_SECONDS,
                    periods=3,
                    comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD, missing=cw.TreatMissingData.BREACHING,
                    description="A segment's watermark is more than 2 minutes behind (or the tick reports no lag).")
        self._alarm("ParkedPartitions", app_metric("ParkedPartitions", "Maximum", FIVE_MINUTES), 1,
                    description="A partition's scans failed again and again: it is parked and retried with backoff "
                                "while the other minutes go on; its executions wait (check the scan logs).")
        self._alarm("TickNotRunning", tick.metric_invocations(period=FIVE_MINUTES, statistic="Sum"), 1,
                    comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD, missing=cw.TreatMissingData.BREACHING,
                    description="The minute tick was not invoked for 5 minutes.")
        self._alarm("ScanErrors", scan.metric_errors(period=FIVE_MINUTES, statistic="Sum"), 1,
                    description="Scan invocations failed (they are retried; check the scan logs).")
        for name, queue in failure_queues.items():
            self._alarm(f"{name}Queued", queue.metric_approximate_number_of_messages_visible(
                period=FIVE_MINUTES, statistic="Maximum"), 1,
                description=f"Events in {name}: they failed every retry; inspect and replay or discard them.")
        self._alarm("DeadLetters", app_metric("DeadLetters", "Sum", FIVE_MINUTES), 1,
                    description="Executions exhausted their retries and went to job-dlq.")
        self._alarm("LateRowsBehindWindow", app_metric("LateRowsBehindWindow", "Sum", FIVE_MINUTES), 1,
                    description="A scan found late rows that landed behind the windows of its late lane it had "
                                "read (a host's clock off by more than 0.5 s?): published late, not lost.")

    def _results_alarms(self, results: lambda_.IFunction) -> None:
        self._alarm("ResultsErrors", results.metric_errors(period=FIVE_MINUTES, statistic="Sum"), 1,
                    description="The results function failed on a batch (the mapping retries it).")
        self._alarm("ResultsRefused", app_metric("Results_refused_token", "Sum", FIVE_MINUTES), 1,
                    description="Results without their execution's result token were refused: a worker "
                                "that drops the token, or someone forging results.")
        self._alarm("ResultsOffsetLag", results_offset_lag(results), RESULTS_LAG_ALARM_RECORDS, periods=3,
                    comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    description=f"The results trigger is more than {RESULTS_LAG_ALARM_RECORDS} records behind "
                                "job-results for 15 minutes: results wait, retries and dead letters are late.")

    def _delivery_alarms(self, delivery: lambda_.IFunction, timeout: Duration) -> None:
        """Deliveries failing (the function's errors, the targets' failures) and late (slow batches, a lag)."""
        self._alarm("DeliveryErrors", delivery.metric_errors(period=FIVE_MINUTES, statistic="Sum"), 1,
                    description="The delivery function failed on a batch (a tenant's secrets unreadable, job-results "
                                "unreachable, a timeout): the mapping retries it; receivers dedup on webhook-id.")
        using = {f"f{index}": app_metric(name, "Sum", FIVE_MINUTES) for index, name in enumerate(DELIVERY_FAILURES)}
        using["ok"] = app_metric("Deliveries_delivered", "Sum", FIVE_MINUTES)
        failed = " + ".join(f"FILL(f{index}, 0)" for index in range(len(DELIVERY_FAILURES)))
        rate = cw.MathExpression(
            expression=f"IF(({failed}) + FILL(ok, 0) >= {DELIVERY_RATE_MIN}, "
                       f"100 * ({failed}) / (({failed}) + FILL(ok, 0)), 0)",
            using_metrics=using, label="failed deliveries (%)", period=FIVE_MINUTES)
        self._alarm("DeliveryFailures", rate, DELIVERY_FAILURE_RATE_ALARM, periods=3,
                    comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    description=f"More than {DELIVERY_FAILURE_RATE_ALARM}% of deliveries failed for 15 minutes "
                                "(they are retried under each job's policy, then dead-lettered).")
        slow_ms = int(timeout.to_milliseconds() * DELIVERY_DURATION_ALARM_SHARE)
        self._alarm("DeliveryDuration", delivery.metric_duration(period=FIVE_MINUTES, statistic="p99"), slow_ms,
                    periods=3, comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    description=f"Delivery batches take more than {DELIVERY_DURATION_ALARM_SHARE:.0%} of the "
                                "function's timeout (p99, 15 minutes): slow endpoints hold them, and calls that "
                                "cannot end in time are put off as retries.")
        self._alarm("DeliveryOffsetLag", results_offset_lag(delivery), DELIVERY_LAG_ALARM_RECORDS, periods=3,
                    comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    description=f"The delivery trigger is more than {DELIVERY_LAG_ALARM_RECORDS} records behind "
                                "job-deliveries for 15 minutes: deliveries reach their targets late.")

    def _keyspaces_alarms(self, keyspace: str) -> None:
        for name, metric_name in KEYSPACES_THROTTLES.items():
            self._alarm(name, cw.MathExpression(
                expression=f"SELECT SUM({metric_name}) FROM \"AWS/Cassandra\" WHERE Keyspace = '{keyspace}'",
                label=f"{metric_name} ({keyspace})", period=FIVE_MINUTES), 1,
                description=f"Keyspaces throttled requests on {keyspace} ({metric_name}): the scans and the "
                            "API retry, and executions run late.")

    def _heartbeat_alarms(self, heartbeat_table: dynamodb.ITable) -> None:
        throttles = cw.MathExpression(expression="reads + writes", label="throttled requests", period=FIVE_MINUTES,
                                      using_metrics={
            "reads": heartbeat_table.metric("ReadThrottleEvents", statistic="Sum", period=FIVE_MINUTES),
            "writes": heartbeat_table.metric("WriteThrottleEvents", statistic="Sum", period=FIVE_MINUTES)})
        self._alarm("HeartbeatThrottles", throttles, 1,
                    description="The heartbeat table (DynamoDB) throttled reads or writes: leases and "
                                "watermarks may lapse, and scans start late.")

    def _dashboard(self, dashboard_name: str, scan: lambda_.IFunction, functions: Mapping[str, lambda_.IFunction],
                   failure_queues: Mapping[str, sqs.IQueue], rest_api: apigw.RestApi | None,
                   results: lambda_.IFunction | None) -> cw.Dashboard:
        lag = app_metric("WatermarkLagSeconds", "Maximum", label="worst segment")
        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=dashboard_name,
                                      default_interval=Duration.hours(3))
        per_segment = cw.MathExpression(
            expression=f"SEARCH('{{{NAMESPACE},segment,service}} MetricName=\"WatermarkLagSeconds\"', "
                       "'Maximum', 60)",
            label="", period=MINUTE,
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Executions published per minute", width=8,
                           left=[app_metric("ExecutionsPublished", "Sum", label="published")]),
            # Percentiles of the executions' own lateness (LatenessMs: a sample of every scan's values), not
            # of each scan's maximum; the maximum comes from MaxLatenessMs, which holds every scan's worst.
            cw.GraphWidget(title="Lateness after the due instant (ms)", width=8,
                           left=[app_metric("LatenessMs", "p50", label="p50"),
                                 app_metric("LatenessMs", "p99", label="p99"),
                                 app_metric("MaxLatenessMs", "Maximum", label="max")]),
            cw.GraphWidget(title="Scans dispatched per minute", width=8,
                           left=[app_metric("ScansDispatched", "Sum", label="dispatched")]),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Watermark lag (s)", width=12, left=[lag, per_segment],
                           left_annotations=[cw.HorizontalAnnotation(value=WATERMARK_LAG_ALARM_SECONDS,
                                                                     label="alarm")]),
            cw.GraphWidget(title="Retries and dead letters", width=12,
                           left=[app_metric("Retries", "Sum", label="retries"),
                                 app_metric("DeadLetters", "Sum", label="dead letters")]),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Parked partitions and unreadable segments (tick)", width=24,
                           left=[app_metric("ParkedPartitions", "Maximum", label="parked partitions"),
                                 app_metric("HeartbeatUnavailableSegments", "Sum",
                                            label="segments with heartbeat errors")],
                           left_annotations=[cw.HorizontalAnnotation(value=1, label="alarm (parked)")]),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Function errors", width=8,
                           left=[f.metric_errors(label=n, period=MINUTE, statistic="Sum")
                                 for n, f in functions.items()]),
            cw.GraphWidget(title="Function throttles", width=8,
                           left=[f.metric_throttles(label=n, period=MINUTE, statistic="Sum")
                                 for n, f in functions.items()]),
            cw.GraphWidget(title="Scan duration (ms) and concurrency", width=8,
                           left=[scan.metric_duration(label="p99 duration", period=MINUTE, statistic="p99")],
                           right=[cw.Metric(namespace="AWS/Lambda", metric_name="ConcurrentExecutions",
                                            dimensions_map={"FunctionName": scan.function_name},
                                            statistic="Maximum", period=MINUTE, label="concurrent scans")]),
        )
        bottom: list[cw.IWidget] = [
            cw.GraphWidget(title="Failed events waiting in queues", width=8,
                           left=[q.metric_approximate_number_of_messages_visible(label=n, period=MINUTE)
                                 for n, q in failure_queues.items()]),
        ]
        if rest_api is not None:
            bottom.append(cw.GraphWidget(
                title="API requests and errors", width=8,
                left=[rest_api.metric_count(label="requests", period=MINUTE),
                      rest_api.metric_client_error(label="4xx", period=MINUTE),
                      rest_api.metric_server_error(label="5xx", period=MINUTE)],
                right=[rest_api.metric_latency(label="p99 latency (ms)", period=MINUTE, statistic="p99")],
            ))
        if results is not None:
            bottom.append(cw.GraphWidget(
                title="Results trigger: records behind job-results", width=8,
                left=[results_offset_lag(results).with_(period=MINUTE, label="offset lag (worst partition)")],
                left_annotations=[cw.HorizontalAnnotation(value=RESULTS_LAG_ALARM_RECORDS, label="alarm")],
            ))
        bottom.append(cw.AlarmStatusWidget(title="Alarms", width=8, alarms=list(self.alarms.values())))
        dashboard.add_widgets(*bottom)
        return dashboard

    @staticmethod
    def _delivery_widgets(delivery: lambda_.IFunction) -> list[cw.IWidget]:
        """Deliveries by outcome, and how late they are: the batches' duration and the trigger's lag."""
        outcomes = [app_metric(name, "Sum", label=name.removeprefix("Deliveries_"))
                    for name in ("Deliveries_delivered", *DELIVERY_FAILURES)]
        return [
            cw.GraphWidget(title="Deliveries per minute, by outcome", width=12, left=outcomes),
            cw.GraphWidget(title="Delivery batches: p99 duration (ms), records behind job-deliveries", width=12,
                           left=[delivery.metric_duration(label="p99 duration", period=MINUTE, statistic="p99")],
                           right=[results_offset_lag(delivery).with_(period=MINUTE, label="offset lag")]),
        ]

    @staticmethod
    def _reconciler_widget() -> cw.IWidget:
        by_reason = cw.MathExpression(
            expression=f"SEARCH('{{{NAMESPACE},reason,service}} MetricName=\"Reconciled\"', 'Sum', 300)",
            label="", period=FIVE_MINUTES)
        return cw.GraphWidget(
            title="Reconciler: executions repaired, by reason (each a bug report), and jobs walked", width=24,
            left=[app_metric("Reconciled", "Sum", FIVE_MINUTES, label="repaired"), by_reason],
            right=[app_metric("ReconcileJobsWalked", "Sum", FIVE_MINUTES, label="jobs walked"),
                   app_metric("ReconcileHistoryReads", "Sum", FIVE_MINUTES, label="history pages read")],
            left_annotations=[cw.HorizontalAnnotation(value=1, label="alarm")])

    def _scan_alarms(self, scan: lambda_.IFunction, reserved: int | None) -> None:
        self._alarm("ScanThrottles", scan.metric_throttles(period=FIVE_MINUTES, statistic="Sum"), 1,
                    description="Scan invocations were throttled (concurrency quota or reservation): Lambda retries "
                                "them from its queue, and their executions run late.")
        self._alarm("ScanEventAge", lambda_metric(scan, "AsyncEventAge", "Maximum"), SCAN_EVENT_AGE_ALARM_MS,
                    periods=3, comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    description="Scan events waited more than a minute in Lambda's async queue for 3 minutes "
                                "(throttles or retries): scans start after their minute.")
        self._alarm("ScanEventsDropped", lambda_metric(scan, "AsyncEventsDropped", "Sum", FIVE_MINUTES), 1,
                    description="Scan events were dropped (too old, or every retry failed): the tick re-dispatches "
                                "a partition whose lease lapsed; check that its minutes were caught up.")
        if reserved:
            self._alarm("ScanConcurrencyNearReservation", lambda_metric(scan, "ConcurrentExecutions", "Maximum"),
                        int(reserved * CONCURRENCY_ALARM_SHARE), periods=3,
                        description=f"The scans used {CONCURRENCY_ALARM_SHARE:.0%} or more of their reserved "
                                    f"concurrency ({reserved}) for 3 minutes: throttling is next.")

    def _api_alarms(self, rest_api: apigw.RestApi) -> None:
        self._alarm("ApiLatencyP99", rest_api.metric_latency(period=FIVE_MINUTES, statistic="p99"), API_P99_ALARM_MS,
                    periods=3, comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    description=f"The API's p99 latency stayed above {API_P99_ALARM_MS} ms for 15 minutes.")
        requests = rest_api.metric_count(period=FIVE_MINUTES, statistic="Sum")
        for name, errors, threshold in (
            ("Api5xxRate", rest_api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"), API_5XX_RATE_ALARM),
            ("Api4xxRate", rest_api.metric_client_error(period=FIVE_MINUTES, statistic="Sum"), API_4XX_RATE_ALARM),
        ):
            rate = cw.MathExpression(
                expression=f"IF(requests >= {API_RATE_MIN_REQUESTS}, 100 * errors / requests, 0)",
                using_metrics={"requests": requests, "errors": errors}, label="% of requests", period=FIVE_MINUTES)
            kind = name[3:6]
            self._alarm(name, rate, threshold, comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                        description=f"More than {threshold}% of the API's requests answered {kind} in 5 minutes "
                                    f"(with {API_RATE_MIN_REQUESTS} requests or more).")

    def _budget(self, monthly_usd: int, name: str | None) -> budgets.CfnBudget:
        def notify(kind: str, percent: int) -> budgets.CfnBudget.NotificationWithSubscribersProperty:
            return budgets.CfnBudget.NotificationWithSubscribersProperty(
                notification=budgets.CfnBudget.NotificationProperty(
                    notification_type=kind, comparison_operator="GREATER_THAN", threshold=percent,
                    threshold_type="PERCENTAGE"),
                subscribers=[budgets.CfnBudget.SubscriberProperty(subscription_type="SNS",
                                                                  address=self.topic.topic_arn)])

        # The account's whole cost: a tag filter would see nothing until the tag is activated for billing.
        return budgets.CfnBudget(self, "Budget", budget=budgets.CfnBudget.BudgetDataProperty(
            budget_name=name, budget_type="COST", time_unit="MONTHLY",
            budget_limit=budgets.CfnBudget.SpendProperty(amount=monthly_usd, unit="USD")),
            notifications_with_subscribers=[notify("ACTUAL", 80), notify("FORECASTED", 100)])

    def _alarm(
        self, name: str, metric: cw.IMetric, threshold: float, *, description: str, periods: int = 1,
        comparison: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        missing: cw.TreatMissingData = cw.TreatMissingData.NOT_BREACHING,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self, name, metric=metric, threshold=threshold, evaluation_periods=periods,
            comparison_operator=comparison, treat_missing_data=missing,
            alarm_description=f"{description} Runbook: {self.runbooks}#{name.lower()}",
        )
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        alarm.add_ok_action(cw_actions.SnsAction(self.topic))
        self.alarms[name] = alarm
        return alarm
