"""The job runner stack: composes the units, wires them together (grants, environment), and outputs.

Constructs never reach into each other; every cross-unit permission is granted here, least privilege:
- api:     Keyspaces read/write, heartbeat table read
- tick:    heartbeat leases, ``lambda:InvokeFunction`` on the scan function (the only invoker)
- scan:    Keyspaces read/write, heartbeat leases, produce to ``jobs``, the allowed topics and ``job-dlq``
           (a timed-out execution that has no retry left is dead-lettered by the scan); read the result key;
           give quota counts back (a job deleted after its last fire)
- results: Keyspaces read/write, consume ``job-results``, produce to ``job-dlq``; read the result key; give
           quota counts back
- delivery (a stage with ``targets``): consume ``job-deliveries`` (which the scan also produces to), produce to
           ``job-results``; its targets and the tenants' webhook secrets (``infra.constructs.delivery``)
- reconcile: read ``job_table_v2``, ``task_history_v2`` and ``task_schedule_v2``, write ``task_schedule_v2`` and
           ``job_changes`` (its repairs and their change-log entries); read the segments and update its own items of
           the heartbeat table; wake the scans of the partitions it writes to
The result key (which signs and checks result tokens) is read by the scan and results functions only: not
by the api or the tick, and not by the workers' policy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import Aws, CfnOutput, Environment, RemovalPolicy, Stack, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from infra.constructs.api import Api
from infra.constructs.dashboard import Dashboard
from infra.constructs.delivery import Delivery, target_resources
from infra.constructs.edge import WebAcl
from infra.constructs.function import FunctionBase, FunctionNetwork, JobRunnerFunction
from infra.constructs.heartbeats import HeartbeatTable
from infra.constructs.layers import Layers
from infra.constructs.monitoring import NAMESPACE, SERVICE, Monitoring
from infra.constructs.nag import acknowledge
from infra.constructs.network import InterfaceEndpoint, Network
from infra.constructs.quotas import QuotaTable
from infra.constructs.reconciler import Reconciler
from infra.constructs.results import RESULTS_TOPIC, Results
from infra.constructs.scanners import Scanners
from infra.constructs.secrets import ResultKey, grant_webhook_secrets
from infra.constructs.storage import KeyspacesSchema, TableCapacity, provisioned_capacity
from infra.constructs.streaming import Streaming
from infra.constructs.tick import Tick
from infra.layer_build import KEYSPACES_BUNDLE
from jobrunner.domain.topics import EVERY_OTHER_TENANT
from jobrunner.services.delivery import DeliveryRules

if TYPE_CHECKING:
    from pathlib import Path

    from constructs import Construct

    from cql.schema import TableSpec
    from infra.config import DeploymentConfig

DEAD_LETTER_TOPIC = "job-dlq"
#: Where each tenant's webhook signing secrets are kept in Secrets Manager: a prefix of the stage's own, so that
#: two stages in one account neither share secrets nor reach each other's.
WEBHOOK_SECRET_PREFIX = "jobrunner/{stage}/webhooks/"
KEYSPACES_PORT = 9142
#: ``xray_tracing`` -> the tracing of the tick and the reconciler (a few invocations a minute), and of the busy
#: functions (scan, results, API), which "sampled" traces only when the caller's trace is sampled.
TRACING = {"active": lambda_.Tracing.ACTIVE, "sampled": lambda_.Tracing.ACTIVE, "off": lambda_.Tracing.DISABLED}
BUSY_TRACING = {"active": lambda_.Tracing.ACTIVE, "sampled": lambda_.Tracing.PASS_THROUGH,
                "off": lambda_.Tracing.DISABLED}


@dataclass(frozen=True)
class StackAssets:
    """Directories the stack deploys, prepared by the app (``infra.app``) before synthesis."""

    dependency_layer: Path
    code_layer: Path
    api: Path
    tick: Path
    scan: Path
    topic_admin: Path
    results: Path
    reconcile: Path
    #: The delivery function's code (deployed on a stage with ``targets`` only).
    delivery: Path
    #: The dashboard's static files (``dashboard/``), copied to S3 and served by CloudFront.
    dashboard: Path
    #: The interpreter that precompiled the layers (the runtime's version); None: they carry no bytecode.
    bytecode_python: str | None = None


class JobRunnerStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        assets: StackAssets,
        tables: list[TableSpec],
    ) -> None:
        # A stage pinned in ``stages`` deploys to its account and region only (the cdk CLI refuses other
        # credentials); a protected one cannot be deleted until its termination protection is lifted.
        pinned = config.account is not None or config.region is not None
        super().__init__(scope, construct_id, description="Distributed Job Runner: scheduler, API and scans",
                         env=Environment(account=config.account, region=config.region) if pinned else None,
                         termination_protection=config.protected)
        self.config = config
        #: The scan function's own name: the tick and the writers that wake scans invoke it by name.
        self.scan_function_name = f"jobrunner-{config.stage}-scan"
        #: The stage's MSK triggers (results, deliveries) share their provisioned pollers' units.
        self.poller_group = f"jobrunner-{config.stage}"
        Tags.of(self).add("project", "distributed-job-runner")
        Tags.of(self).add("stage", config.stage)
        # Data is kept on update and delete, but not when its own creation rolls back: a failed first
        # deploy then leaves no keyspace behind whose fixed name would make every retry fail.
        removal = RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if config.retain_data else RemovalPolicy.DESTROY
        retention = logs.RetentionDays[config.log_retention_name]
        architecture = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}[
            config.lambda_architecture]
        targets = config.targets
        #: The topic of the executions of jobs with a target, when the stage allows them (and so the delivery function).
        self.delivery_topic = config.settings.delivery_topic if targets is not None else None
        topics = {name: config.kafka_partitions for name in (*config.allowed_topics, RESULTS_TOPIC, DEAD_LETTER_TOPIC,
                                                             *([self.delivery_topic] if self.delivery_topic else []))}

        # X-Ray: the functions in the VPC trace actively, and their subsegments need a way out. Secrets Manager:
        # the scan (and results) function reads the result key at cold start (and, with an existing Cassandra
        # secret, every function reads that); the subnets have no NAT, so only an endpoint reaches it.
        endpoints = {InterfaceEndpoint.SECRETS_MANAGER}
        if config.xray_tracing != "off":
            endpoints.add(InterfaceEndpoint.XRAY)
        if config.uses_keyspaces:
            endpoints.add(InterfaceEndpoint.KEYSPACES)
        endpoints.add(InterfaceEndpoint.LAMBDA)  # the API and the scans wake scans (``services.wake``)
        endpoints |= {InterfaceEndpoint.STS, InterfaceEndpoint.SQS}  # the results function's MSK trigger
        self.network = Network(self, "Network", cidr=config.vpc_cidr, availability_zones=config.availability_zones,
                               interface_endpoints=endpoints, endpoint_zones=config.endpoint_zones,
                               flow_log_retention=retention, delivery=targets is not None,
                               nat_gateways=config.nat_gateways)
        function_network = FunctionNetwork(vpc=self.network.vpc, subnets=self.network.subnets,
                                           security_group=self.network.function_security_group)
        self.heartbeats = HeartbeatTable(self, "Heartbeats", removal_policy=removal,
                                         deletion_protection=config.protected)
        self.quotas = QuotaTable(self, "Quotas")
        # The key of the result tokens, removed (or kept) like the data: with retain_data, kept on update and delete.
        self.result_key = ResultKey(self, "ResultKey", removal_policy=removal)
        self.keyspaces = (KeyspacesSchema(self, "Keyspaces", keyspace_name=config.keyspace, tables=tables,
                                          removal_policy=removal, adopt=config.adopt_keyspace,
                                          pitr_tables=config.point_in_time_recovery,
                                          capacity=self._table_capacity(tables))
                          if config.uses_keyspaces else None)
        self.layers = Layers(self, "Layers", dependencies_dir=assets.dependency_layer, code_dir=assets.code_layer,
                             architecture=architecture)
        # The topic admin function needs no application settings; the job runner's functions get them
        # below, once the bootstrap brokers exist.
        base = FunctionBase(layers=self.layers.all, architecture=architecture, log_retention=retention,
                            network=function_network, tracing=TRACING[config.xray_tracing])
        # A provisioned cluster has a name of its own: switching a stage between the two kinds creates the new
        # cluster before CloudFormation deletes the old one, and the two must not clash.
        cluster_name = f"jobrunner-{config.stage}" + ("-provisioned" if config.kafka_provisioned else "")
        self.streaming = Streaming(
            self, "Streaming", cluster_name=cluster_name,
            subnets=self.network.vpc.isolated_subnets,
            security_group=self.network.kafka_security_group, topics=topics, topic_admin_code=assets.topic_admin,
            base=base, log_retention=retention, client_vpcs=config.kafka_client_vpcs,
            provisioned=config.kafka_provisioned,
        )

        base = FunctionBase(layers=self.layers.all, architecture=architecture, log_retention=retention,
                            network=function_network, environment=self._environment(),
                            tracing=TRACING[config.xray_tracing])
        # The functions invoked per minute and segment, per batch of results and per request (issue #33).
        busy = dataclasses.replace(base, tracing=BUSY_TRACING[config.xray_tracing])
        self.scanners = Scanners(self, "Scan", base=busy, code=assets.scan, memory_size=config.scan_memory_mb,
                                 reserved_concurrency=config.scan_reserved_concurrency,
                                 function_name=self.scan_function_name)
        self.tick = Tick(self, "Tick", base=base, code=assets.tick)
        self.api = Api(self, "Api", base=busy, code=assets.api, auth=config.api_auth, stage_name=config.stage,
                       rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit,
                       deletion_protection=config.protected, principals=config.api_principals,
                       domain=config.api_domain, tracing=config.xray_tracing != "off")
        self.web_acl = self._web_acl()
        # The dashboard's files, and the API again, on one CloudFront origin (the page calls the API on its own).
        self.dashboard = (Dashboard(self, "Dashboard", files=assets.dashboard, rest_api=self.api.rest_api,
                                    domain=config.dashboard_domain)
                          if config.web_dashboard else None)
        results_base = dataclasses.replace(busy, environment={**busy.environment, **self._results_logging()})
        self.results = Results(self, "Results", base=results_base, code=assets.results,
                               cluster_arn=self.streaming.cluster_arn,
                               consumer_group=f"jobrunner-{config.stage}-results", max_pollers=config.results_pollers,
                               poller_group=self.poller_group)
        self.reconciler = Reconciler(self, "Reconcile", base=base, code=assets.reconcile,
                                     interval_minutes=config.reconcile_interval_minutes)
        self.delivery = self._delivery(busy, assets.delivery)
        # Only the signer (scan) and the checker (results) know where the result key is.
        for holder in self._result_key_holders():
            for name, value in self.result_key.environment.items():
                holder.function.add_environment(name, value)

        # Nothing publishes or consumes before the topics exist (the cluster does not auto-create them).
        self.tick.rule.node.add_dependency(self.streaming.topics_resource)
        self.results.event_source.node.add_dependency(self.streaming.topics_resource)
        if self.delivery is not None:
            self.delivery.event_source.node.add_dependency(self.streaming.topics_resource)
        self._after_the_tables()
        self._grant()
        self._existing_cassandra_access()
        # What a worker's role needs (attach it to the role of your EC2 instance, task or function): the topics no
        # tenant has to itself, so that a tenant's own topics are read by its own workers only.
        self.worker_policy = iam.ManagedPolicy(
            self, "WorkerPolicy", description=f"Job runner {config.stage}: workers consume executions, report results",
            statements=self.streaming.worker_statements(
                consume=config.shared_topics, produce=[RESULTS_TOPIC], groups=config.worker_groups),
        )
        # One per tenant with topics of its own: its workers read only those.
        self.tenant_worker_policies = [
            (index, tenant, iam.ManagedPolicy(
                self, f"TenantWorkerPolicy{index}",
                description=f"Job runner {config.stage}: workers of tenant {tenant} consume its topics, report results",
                statements=self.streaming.worker_statements(consume=topics, produce=[RESULTS_TOPIC],
                                                            groups=config.worker_groups)))
            for index, (tenant, topics) in enumerate(config.tenant_topics) if tenant != EVERY_OTHER_TENANT and topics
        ]
        functions = {"api": self.api.handler.function, "tick": self.tick.function, "scan": self.scanners.function,
                     "results": self.results.function, "reconcile": self.reconciler.function}
        failure_queues = {"TickDeadLetters": self.tick.dead_letter_queue,
                          "ScanFailedInvocations": self.scanners.failed_invocations,
                          "ResultsFailedBatches": self.results.failed_batches}
        if self.delivery is not None:
            functions["delivery"] = self.delivery.function
            failure_queues["DeliveryFailedBatches"] = self.delivery.failed_batches
        self.monitoring = Monitoring(
            self, "Monitoring", dashboard_name=f"jobrunner-{config.stage}", tick=self.tick.function,
            scan=self.scanners.function, functions=functions,
            failure_queues=failure_queues,
            delivery=self.delivery.function if self.delivery is not None else None,
            delivery_timeout=self.delivery.timeout if self.delivery is not None else None,
            rest_api=self.api.rest_api, results=self.results.function, reconciler=self.reconciler.function,
            alarm_email=config.alarm_email, heartbeat_table=self.heartbeats.table,
            keyspace=config.keyspace if config.uses_keyspaces else None,
            scan_reserved_concurrency=config.scan_reserved_concurrency,
            monthly_budget_usd=config.monthly_budget_usd, budget_name=f"jobrunner-{config.stage}",
            runbooks=config.runbook_url or (self.dashboard.runbooks_url if self.dashboard else ""),
        )
        self._outputs()

    def _delivery(self, base: FunctionBase, code: Path) -> Delivery | None:
        """The delivery function, on a stage that allows targets: in the egress subnets with its own security group,
        granted what the allow-lists name (``infra.constructs.delivery``)."""
        config, targets, group = self.config, self.config.targets, self.network.delivery_security_group
        if targets is None or group is None:
            return None
        network = FunctionNetwork(vpc=self.network.vpc, subnets=self.network.delivery_subnets, security_group=group)
        settings = config.settings
        return Delivery(
            self, "Delivery", base=dataclasses.replace(base, network=network), code=code,
            cluster_arn=self.streaming.cluster_arn, consumer_group=f"jobrunner-{config.stage}-delivery",
            targets=target_resources(kinds=settings.target_kinds, lambda_allow=settings.target_lambda_allow,
                                     sqs_allow=settings.target_sqs_allow),
            secret_prefix=WEBHOOK_SECRET_PREFIX.format(stage=config.stage), topic=settings.delivery_topic,
            rules=DeliveryRules(concurrency=settings.delivery_concurrency,
                                tenant_concurrency=settings.delivery_tenant_concurrency),
            max_pollers=config.results_pollers, poller_group=self.poller_group,
        )

    def _web_acl(self) -> WebAcl | None:
        """The API stage's web ACL (``waf_rate_limit``), or the reason the stage goes without one."""
        limit = self.config.waf_rate_limit
        if limit is None:
            acknowledge(self.api.rest_api, {
                "AwsSolutions-APIG3": "No WAF web ACL on this stage (waf_rate_limit 0, or auto on an unprotected "
                                      "stage): every route but GET on the public paths is authenticated, the resource "
                                      "policy admits the listed principals only, and the stage is throttled.",
            })
            return None
        return WebAcl(self, "Edge", name=f"jobrunner-{self.config.stage}-api", rate_limit=limit,
                      resource_arn=self.api.rest_api.deployment_stage.stage_arn)

    def _table_capacity(self, tables: list[TableSpec]) -> dict[str, TableCapacity] | None:
        """Provisioned capacity with auto scaling for each table (``keyspaces_capacity``), or None: on-demand."""
        expected = self.config.expected_executions_per_day
        if self.config.keyspaces_capacity != "provisioned" or expected is None:
            return None
        return provisioned_capacity([spec.name for spec in tables], expected)

    def _results_logging(self) -> dict[str, str]:
        """The results function logs its line per execution in a sample of invocations (``results_log_sample_rate``);
        the others log warnings and errors only."""
        rate = self.config.results_log_sample_rate
        if rate >= 1:
            return {}
        return {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_LOGGER_SAMPLE_RATE": f"{rate:g}"}

    def _environment(self) -> dict[str, str]:
        """The variables ``jobrunner.config.Settings`` reads, common to every function: only those set here."""
        config = self.config
        # The context's runtime settings (``config.settings``, checked as the functions read them), and the stack's.
        settings: dict[str, object] = {
            "results_topic": RESULTS_TOPIC, "dead_letter_topic": DEAD_LETTER_TOPIC,
            "kafka_bootstrap": self.streaming.bootstrap_brokers, "kafka_security": "msk-iam",
            "heartbeat_table": self.heartbeats.table_name, "quota_table": self.quotas.table_name,
            # The tick dispatches scans; the writers of late rows wake them, so idle scans end early.
            "scan_function": self.scan_function_name, "wake_scans": True,
        }
        # The targets' kinds and allow-lists are in config.settings (``targets``; none when off: a job may name no
        # target, or its executions would go to a topic nothing consumes); their secrets under the stage's prefix.
        if config.targets is not None:
            settings["webhook_secret_prefix"] = WEBHOOK_SECRET_PREFIX.format(stage=config.stage)
        if config.existing_cassandra is None:
            settings.update(cassandra_mode="keyspaces", contact_points=(f"cassandra.{Aws.REGION}.{Aws.URL_SUFFIX}",),
                            cassandra_port=KEYSPACES_PORT, keyspace=config.keyspace, ca_bundle=KEYSPACES_BUNDLE)
        else:  # its contact points, port and secret are in config.settings
            settings.update(cassandra_mode="cassandra", keyspace=config.keyspace)
        tracer = {"POWERTOOLS_TRACE_DISABLED": "true"} if config.xray_tracing == "off" else {}
        return {**config.settings.replace(**settings).to_environment(given_only=True),
                "POWERTOOLS_SERVICE_NAME": SERVICE, "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE, **tracer}

    def _after_the_tables(self) -> None:
        """Every function of the job runner is created and updated after the keyspace's tables: a release whose code
        writes a column it adds (``job_table_v2.created_by``) finds the column there, never a window where its
        writes are refused."""
        if self.keyspaces is None:
            return
        functions = [self.api.handler.function, self.tick.function, self.scanners.function, self.results.function,
                     self.reconciler.function, *([self.delivery.function] if self.delivery is not None else [])]
        for function in functions:
            for table in self.keyspaces.tables.values():
                function.node.add_dependency(table)

    def _result_key_holders(self) -> list[JobRunnerFunction]:
        """The functions that sign (scan) or check (results) result tokens: the only readers of the key."""
        return [self.scanners.handler, self.results.handler]

    def _grant(self) -> None:
        api, tick, scan = self.api.handler.role, self.tick.handler.role, self.scanners.handler.role
        writers: list[iam.IGrantable] = [api, scan, self.results.handler.role]
        if self.keyspaces is not None:
            for grantee in writers:
                self.keyspaces.grant_read_write(grantee)
        self.heartbeats.grant_read(api)
        self.quotas.grant_admit(api)
        for retirer in (scan, self.results.handler.role):  # a job deleted after its last fire gives its count back
            self.quotas.grant_give_back(retirer)
        self.heartbeats.grant_segment_start(api)
        self.heartbeats.grant_leases(tick)
        self.heartbeats.grant_leases(scan)
        for invoker in (tick, *writers):  # the tick dispatches scans; the writers of late rows wake them
            self.scanners.grant_dispatch(invoker)
        # The scan publishes the executions of jobs with a target to the delivery topic.
        self.streaming.grant_produce(scan, [*self.config.allowed_topics, DEAD_LETTER_TOPIC,
                                            *([self.delivery_topic] if self.delivery_topic else [])])
        role = self.results.handler.role
        self.streaming.grant_consume(role, topic=self.results.topic, group=self.results.consumer_group)
        self.streaming.grant_produce(role, [DEAD_LETTER_TOPIC])
        self.heartbeats.grant_segment_start(role)
        for holder in self._result_key_holders():
            self.result_key.grant_read(holder.role)
        self._grant_reconciler()
        if self.delivery is not None:
            self.streaming.grant_consume(self.delivery.role, topic=self.delivery.topic,
                                         group=self.delivery.consumer_group)
            self.streaming.grant_produce(self.delivery.role, [RESULTS_TOPIC])
            # The tenants read and rotate the secrets their deliveries are signed with through the API.
            grant_webhook_secrets(api, WEBHOOK_SECRET_PREFIX.format(stage=self.config.stage),
                                  why="read, created on first use and rotated through the API by its tenant")

    def _grant_reconciler(self) -> None:
        """What the reconciler reads (jobs, history, the done partitions' rows, the segments) and writes (its repairs,
        their change-log entries, its own state and lease), and the wakes of the scans it writes to."""
        role = self.reconciler.handler.role
        if self.keyspaces is not None:
            self.keyspaces.grant_tables(role, read=["job_table_v2", "task_history_v2", "task_schedule_v2"],
                                        write=["task_schedule_v2", "job_changes"])
        self.heartbeats.grant_read(role)
        self.heartbeats.grant_segment_start(role)
        self.heartbeats.grant_reconciler(role)
        self.scanners.grant_dispatch(role)

    def _existing_cassandra_access(self) -> None:
        existing = self.config.existing_cassandra
        if existing is None:
            return
        self.network.function_security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(existing.port), "The existing Cassandra cluster (CQL)",
        )
        if existing.secret_arn:
            for role in (self.api.handler.role, self.scanners.handler.role, self.results.handler.role,
                         self.reconciler.handler.role):
                role.add_to_policy(iam.PolicyStatement(
                    actions=["secretsmanager:GetSecretValue"], resources=[existing.secret_arn],
                ))

    def _outputs(self) -> None:
        outputs = {
            "ApiUrl": (self.api.url, "Base URL of the HTTP API"),
            "HeartbeatTableName": (self.heartbeats.table_name, "DynamoDB heartbeat table"),
            "ScanFunctionName": (self.scanners.function.function_name, "Scan function"),
            "TickFunctionName": (self.tick.function.function_name, "Tick function"),
            "ReconcileFunctionName": (self.reconciler.function.function_name, "Reconciler function"),
            "KafkaClusterArn": (self.streaming.cluster_arn, "MSK provisioned cluster" if self.config.kafka_provisioned
                                else "MSK Serverless cluster"),
            "KafkaBootstrapBrokers": (self.streaming.bootstrap_brokers, "Bootstrap brokers (IAM auth, port 9098)"),
            "AlarmTopicArn": (self.monitoring.topic.topic_arn, "Alarm notifications"),
            "VpcId": (self.network.vpc.vpc_id, "The VPC (isolated subnets: no internet, AWS through endpoints)"),
            "PrivateSubnetIds": (",".join(s.subnet_id for s in self.network.vpc.isolated_subnets),
                                 "Subnets for workers in the stack's VPC"),
            "WorkerSecurityGroupId": (self.network.worker_security_group.security_group_id,
                                      "Security group for workers: Kafka (9098) and the VPC endpoints"),
            "KafkaSecurityGroupId": (self.network.kafka_security_group.security_group_id,
                                     "The cluster's security group (allows 9098 from the worker group)"),
            "WorkerPolicyArn": (self.worker_policy.managed_policy_arn,
                                "Managed policy for a worker's role: read the job topics no tenant has to "
                                "itself, write job-results"),
            "WorkerGroups": (",".join(self.config.worker_groups), "Consumer groups the worker policy allows"),
            "DashboardName": (f"jobrunner-{self.config.stage}", "CloudWatch dashboard (metrics and alarms)"),
            "ResultKeySecretArn": (self.result_key.secret_arn,
                                   "Secret holding the result tokens' key (scan and results only; rotate per docs)"),
        }
        if self.delivery is not None:
            outputs["DeliveryFunctionName"] = (self.delivery.function.function_name,
                                               "Delivery function (targets: HTTPS, Lambda, SQS)")
        if self.dashboard is not None:
            outputs["DashboardUrl"] = (self.dashboard.url, "The web dashboard (CloudFront); the API is also at its "
                                                           "origin's root, for bearer tokens (api_auth=cognito)")
        if self.api.domain is not None and self.config.api_domain is not None:
            outputs["ApiDomainUrl"] = (f"https://{self.config.api_domain.domain_name}/",
                                       "The API on its own domain (TLS 1.2)")
            outputs["ApiDomainTarget"] = (self.api.domain.domain_name_alias_domain_name,
                                          "Where the API domain's CNAME (or alias) record points")
        if self.web_acl is not None:
            outputs["WebAclArn"] = (self.web_acl.arn, "WAF web ACL of the API stage (rate per source IP)")
        if self.dashboard is not None and self.dashboard.domain is not None:
            outputs["DashboardDomainTarget"] = (self.dashboard.distribution.distribution_domain_name,
                                                "Where the dashboard domain's CNAME (or alias) record points")
        if self.keyspaces is not None:
            outputs["KeyspaceName"] = (self.keyspaces.keyspace_name, "Amazon Keyspaces keyspace")
        if self.api.user_pool is not None and self.api.user_pool_client is not None:
            outputs["UserPoolId"] = (self.api.user_pool.user_pool_id, "Cognito user pool of the API's tenants")
            outputs["UserPoolClientId"] = (self.api.user_pool_client.user_pool_client_id, "Cognito app client")
        for index, tenant, policy in self.tenant_worker_policies:  # the output is named as its policy is
            outputs[f"TenantWorkerPolicy{index}Arn"] = (policy.managed_policy_arn, f"Worker policy of tenant {tenant}")
        for name, (value, description) in outputs.items():
            CfnOutput(self, name, value=value, description=description)
