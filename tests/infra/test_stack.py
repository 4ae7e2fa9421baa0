"""The whole app, synthesized once per variant: composition, wiring, least privilege, outputs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.infra.conftest import VARIANTS

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.infra.conftest import Synthesized

#: What every function gets (jobrunner.config.Settings reads them).
COMMON_ENV = {"JOBRUNNER_SEGMENTS", "JOBRUNNER_TOPIC", "JOBRUNNER_ALLOWED_TOPICS", "JOBRUNNER_RESULTS_TOPIC",
              "JOBRUNNER_DLQ_TOPIC", "KAFKA_BOOTSTRAP", "KAFKA_SECURITY", "HEARTBEAT_TABLE", "CASSANDRA_MODE",
              "CASSANDRA_CONTACT_POINTS", "CASSANDRA_PORT", "CASSANDRA_KEYSPACE", "POWERTOOLS_SERVICE_NAME",
              "POWERTOOLS_METRICS_NAMESPACE"}


def _functions(app: Synthesized) -> dict[str, dict[str, Any]]:
    """Job runner functions by unit (Api, Tick, Scan, Results), from their logical ids."""
    return {lid.split("Handler")[0]: r["Properties"] for lid, r in app.resources("AWS::Lambda::Function").items()
            if "HandlerFunction" in lid}


def _heartbeat_table(app: Synthesized) -> dict[str, Any]:
    (table,) = [r for lid, r in app.resources("AWS::DynamoDB::Table").items() if lid.startswith("Heartbeats")]
    return table


def _statements(app: Synthesized, unit: str) -> list[dict[str, Any]]:
    return [s for p in app.resources("AWS::IAM::Policy").values()
            if p["Properties"]["Roles"][0]["Ref"].startswith(f"{unit}HandlerRole")
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def _actions(app: Synthesized, unit: str) -> set[str]:
    actions = set()
    for statement in _statements(app, unit):
        value = statement["Action"]
        actions |= {value} if isinstance(value, str) else set(value)
    return actions


def test_every_unit_is_there(default_app: Synthesized) -> None:
    counts = {t: len(default_app.resources(t)) for t in (
        "AWS::MSK::ServerlessCluster", "Custom::KafkaTopics", "AWS::DynamoDB::Table", "AWS::Cassandra::Keyspace",
        "AWS::ApiGateway::RestApi", "AWS::Events::Rule", "AWS::Lambda::EventSourceMapping",
        "AWS::CloudWatch::Dashboard", "AWS::Lambda::LayerVersion", "AWS::S3::Bucket",
        "AWS::CloudFront::Distribution", "Custom::CDKBucketDeployment")}

    # Layers: the dependencies and the code, and the AWS CLI layer of CDK's BucketDeployment (the dashboard's);
    # rules: the minute tick's and the reconciler's
    assert counts == {t: {"AWS::Lambda::LayerVersion": 3, "AWS::DynamoDB::Table": 2, "AWS::Events::Rule": 2}.get(t, 1)
                      for t in counts}
    assert sorted(_functions(default_app)) == ["Api", "Reconcile", "Results", "Scan", "Tick"]


def test_functions_get_the_settings_they_read(default_app: Synthesized) -> None:
    functions = _functions(default_app)

    for unit, function in functions.items():
        variables = function["Environment"]["Variables"]
        assert set(variables) >= COMMON_ENV, unit
        assert variables["CASSANDRA_MODE"] == "keyspaces"
        assert variables["CASSANDRA_PORT"] == "9142"
        assert variables["CASSANDRA_CA_BUNDLE"] == "/opt/python/jobrunner_certs/keyspaces-bundle.pem"
        assert variables["KAFKA_SECURITY"] == "msk-iam"
        assert variables["KAFKA_BOOTSTRAP"]["Fn::GetAtt"][1] == "BootstrapBrokerStringSaslIam"
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "JobRunner"
        assert variables["JOBRUNNER_SEGMENTS"] == "16"
        assert function["Runtime"] == "python3.13" and function["Architectures"] == ["arm64"]
        assert len(function["Layers"]) == 2
    # every function names the scan function (the tick dispatches scans, the writers of late rows wake
    # them), by the name it is given, which refers to nothing of the function (no dependency cycle)
    assert functions["Scan"]["FunctionName"] == "jobrunner-dev-scan"
    for unit, function in functions.items():
        variables = function["Environment"]["Variables"]
        wakes = (variables["SCAN_FUNCTION_NAME"], variables["JOBRUNNER_WAKE_SCANS"])
        assert wakes == ("jobrunner-dev-scan", "true"), unit
        # no delivery function is deployed yet (#35): no job may name a target
        assert variables["JOBRUNNER_TARGET_KINDS"] == "none", unit


def test_the_tick_and_the_writers_of_late_rows_invoke_the_scan_by_its_name(default_app: Synthesized) -> None:
    invokers = {p["Properties"]["Roles"][0]["Ref"].split("HandlerRole")[0]: s["Resource"]
                for p in default_app.resources("AWS::IAM::Policy").values()
                for s in p["Properties"]["PolicyDocument"]["Statement"]
                if "lambda:InvokeFunction" in json.dumps(s["Action"]) and "jobrunner-dev-scan" in json.dumps(s)}

    assert set(invokers) == {"Tick", "Api", "Scan", "Results", "Reconcile"}
    for resource in invokers.values():  # unqualified: no version or alias
        assert json.dumps(resource).endswith(':function:jobrunner-dev-scan"]]}')
    # and nothing else invokes it
    assert not [s for p in default_app.resources("AWS::IAM::Policy").values()
                for s in p["Properties"]["PolicyDocument"]["Statement"]
                if "ScanHandlerFunction" in json.dumps(s) and "lambda:InvokeFunction" in json.dumps(s["Action"])]


@pytest.mark.parametrize(("unit", "allowed", "denied"), [
    ("Api", {"cassandra:Select", "cassandra:Modify", "dynamodb:GetItem", "dynamodb:BatchGetItem",
             "lambda:InvokeFunction"}, {"kafka-cluster:WriteData"}),
    ("Tick", {"dynamodb:UpdateItem", "lambda:InvokeFunction"}, {"cassandra:Modify", "kafka-cluster:WriteData"}),
    ("Scan", {"cassandra:Modify", "dynamodb:UpdateItem", "kafka-cluster:WriteData",
              "kafka-cluster:WriteDataIdempotently", "lambda:InvokeFunction"}, {"kafka-cluster:ReadData"}),
    ("Results", {"cassandra:Modify", "kafka-cluster:ReadData", "kafka-cluster:AlterGroup", "kafka-cluster:WriteData",
                 "lambda:InvokeFunction"}, set()),
    ("Reconcile", {"cassandra:Select", "cassandra:Modify", "dynamodb:BatchGetItem", "dynamodb:UpdateItem",
                   "lambda:InvokeFunction"},
     {"kafka-cluster:WriteData", "kafka-cluster:ReadData", "kafka-cluster:Connect", "secretsmanager:GetSecretValue"}),
])
def test_each_function_holds_what_it_needs_and_no_more(
    default_app: Synthesized, unit: str, allowed: set[str], denied: set[str],
) -> None:
    actions = _actions(default_app, unit)

    assert allowed <= actions
    assert not denied & actions
    assert not [a for a in actions if a.endswith("*")]


@pytest.mark.parametrize("unit", ["Api", "Results"])
def test_api_and_results_update_only_watermarks_and_the_segment_count(default_app: Synthesized, unit: str) -> None:
    updates = [s for s in _statements(default_app, unit) if "dynamodb:UpdateItem" in json.dumps(s["Action"])
               and "Heartbeats" in json.dumps(s["Resource"])]

    assert updates  # they record the segment count they place rows with
    assert all(s["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"]
               == ["segment", "minute", "watermark", "highest_segment_count"] for s in updates)


def test_the_reconciler_reads_jobs_and_history_and_writes_only_rows_change_log_and_its_own_items(
    default_app: Synthesized,
) -> None:
    def tables(action: str) -> set[str]:
        return {json.dumps(r).split("/table/")[-1].split('"')[0] for s in _statements(default_app, "Reconcile")
                if action in json.dumps(s["Action"]) for r in (s["Resource"] if isinstance(s["Resource"], list)
                                                               else [s["Resource"]]) if "/table/" in json.dumps(r)}

    assert tables("cassandra:Select") == {"job_table_v2", "task_history_v2", "task_schedule_v2"}
    assert tables("cassandra:Modify") == {"task_schedule_v2", "job_changes"}
    updates = [s for s in _statements(default_app, "Reconcile") if "dynamodb:UpdateItem" in json.dumps(s["Action"])]
    # its own items (state, lease) by their key, and otherwise only what every writer may: watermarks, the count
    conditions = [s["Condition"]["ForAllValues:StringEquals"] for s in updates]
    assert {"dynamodb:LeadingKeys": ["-2"]} in conditions
    assert all(c in ({"dynamodb:LeadingKeys": ["-2"]},
                     {"dynamodb:Attributes": ["segment", "minute", "watermark", "highest_segment_count"]})
               for c in conditions)


def test_the_reconciler_runs_on_its_own_rule_without_retries(default_app: Synthesized) -> None:
    (rule,) = [r["Properties"] for lid, r in default_app.resources("AWS::Events::Rule").items()
               if lid.startswith("Reconcile")]
    assert rule["ScheduleExpression"] == "rate(1 minute)"
    assert rule["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    reconcile = _functions(default_app)["Reconcile"]
    assert reconcile["Timeout"] == 60 and "VpcConfig" in reconcile
    assert reconcile["Environment"]["Variables"]["JOBRUNNER_RECONCILE_INTERVAL_S"] == "60"


def test_scan_writes_only_to_its_topics(default_app: Synthesized) -> None:
    writes = [s for s in _statements(default_app, "Scan") if "kafka-cluster:WriteData" in s["Action"]]

    topics = sorted(r["Fn::Join"][1][-1] for s in writes for r in ([s["Resource"]] if isinstance(s["Resource"], dict)
                                                                       else s["Resource"]))
    assert topics == ["/job-dlq", "/jobs"]


def test_nothing_runs_before_the_topics_exist(default_app: Synthesized) -> None:
    (topics,) = default_app.resources("Custom::KafkaTopics")
    (rule,) = [r for lid, r in default_app.resources("AWS::Events::Rule").items() if lid.startswith("Tick")]
    (mapping,) = default_app.resources("AWS::Lambda::EventSourceMapping").values()

    assert topics in rule["DependsOn"]
    assert topics in mapping["DependsOn"]


def test_topics_include_results_dead_letters_and_allowed_topics(synth: Callable[[str], Synthesized]) -> None:
    (topics,) = synth("cognito-x86").resources("Custom::KafkaTopics").values()

    assert [t["Name"] for t in topics["Properties"]["Topics"]] == ["job-dlq", "job-results", "jobs", "payments",
                                                                   "reports"]


def test_outputs(default_app: Synthesized) -> None:
    assert set(default_app.template["Outputs"]) >= {
        "ApiUrl", "HeartbeatTableName", "ScanFunctionName", "KafkaClusterArn", "KafkaBootstrapBrokers",
        "KeyspaceName", "AlarmTopicArn", "DashboardName", "DashboardUrl",
    }
    # The web dashboard: CloudFront's /ui, in front of this stack's API as well
    (distribution,) = default_app.resources("AWS::CloudFront::Distribution")
    url = default_app.template["Outputs"]["DashboardUrl"]["Value"]["Fn::Join"][1]
    assert url == ["https://", {"Fn::GetAtt": [distribution, "DomainName"]}, "/ui"]
    (rest_api,) = default_app.resources("AWS::ApiGateway::RestApi")
    origins = default_app.resources("AWS::CloudFront::Distribution")[distribution]["Properties"][
        "DistributionConfig"]["Origins"]
    assert any(rest_api in json.dumps(origin["DomainName"]) for origin in origins)


def test_cognito_variant(synth: Callable[[str], Synthesized]) -> None:
    app = synth("cognito-x86")

    assert {"UserPoolId", "UserPoolClientId"} <= set(app.template["Outputs"])
    assert all(f["Architectures"] == ["x86_64"] for f in _functions(app).values())
    (scan,) = [f for u, f in _functions(app).items() if u == "Scan"]
    assert scan["ReservedConcurrentExecutions"] == 2 * 64 + 16
    assert scan["Environment"]["Variables"]["JOBRUNNER_ALLOWED_TOPICS"] == "jobs,reports,payments"
    assert app.resources("AWS::SNS::Subscription")


def test_tenants_settings_reach_every_function_and_a_tenant_gets_a_worker_policy_of_its_own(
    synth: Callable[[str], Synthesized],
) -> None:
    # Given a stage with topics granted per tenant, a principal mapped to a tenant and an operator
    app = synth("cognito-x86")
    # Then every function reads the same tenants' settings
    for unit, function in _functions(app).items():
        variables = function["Environment"]["Variables"]
        grants = json.loads(variables["JOBRUNNER_TENANT_TOPICS"])
        assert grants == {"payments": ["payments", "jobs"], "*": ["jobs"]}, unit
        assert json.loads(variables["JOBRUNNER_TENANT_MAP"]) == {
            "arn:aws:iam::123456789012:role/payments-ci": "payments"}, unit
        assert variables["JOBRUNNER_OPERATORS"] == "ops", unit
    # and the payments tenant's workers get a policy that reads its topics only (none for "*")
    policies = {lid: r["Properties"] for lid, r in app.resources("AWS::IAM::ManagedPolicy").items()}
    ((policy_id, tenant_policy),) = [(lid, p) for lid, p in policies.items() if lid.startswith("TenantWorkerPolicy")]
    assert "tenant payments" in tenant_policy["Description"]
    reads = [s for s in tenant_policy["PolicyDocument"]["Statement"] if "kafka-cluster:ReadData" in s["Action"]]
    topics = json.dumps(reads)
    assert "/payments" in topics and "/jobs" in topics and "/reports" not in topics
    # and the stack's WorkerPolicy no longer reads payments' own topic (jobs and reports are shared)
    shared = policies[next(lid for lid in policies if lid.startswith("WorkerPolicy"))]
    shared_reads = json.dumps([s for s in shared["PolicyDocument"]["Statement"]
                               if "kafka-cluster:ReadData" in s["Action"]])
    assert "/jobs" in shared_reads and "/reports" in shared_reads and "/payments" not in shared_reads
    # its output is named as the policy is (the second entry: "*" comes first in the context)
    assert policy_id.startswith("TenantWorkerPolicy1")
    output = app.template["Outputs"]["TenantWorkerPolicy1Arn"]
    assert output["Value"] == {"Ref": policy_id} and "tenant payments" in output["Description"]
    # while a stage without them sets none of it
    default = _functions(synth("default"))["Api"]["Environment"]["Variables"]
    assert not {"JOBRUNNER_TENANT_TOPICS", "JOBRUNNER_TENANT_MAP", "JOBRUNNER_OPERATORS"} & set(default)


def test_dev_deploys_where_the_credentials_point_unprotected(default_app: Synthesized) -> None:
    assert default_app.manifest["environment"] == "aws://unknown-account/unknown-region"
    assert not default_app.manifest["properties"].get("terminationProtection")
    table = _heartbeat_table(default_app)
    assert table["Properties"]["DeletionProtectionEnabled"] is False


def test_a_protected_stage_is_pinned_and_protected_from_deletion(synth: Callable[[str], Synthesized]) -> None:
    # Given prod, pinned in stages to an account and region (the cdk CLI has looked up the region's zones)
    app = synth("cognito-x86")

    # Then the stack deploys there only, cannot be deleted while protected, nor can its data resources
    assert app.manifest["environment"] == "aws://123456789012/eu-west-1"
    assert app.manifest["properties"]["terminationProtection"] is True
    table = _heartbeat_table(app)
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    (pool,) = app.resources("AWS::Cognito::UserPool").values()
    assert pool["Properties"]["DeletionProtection"] == "ACTIVE"
    # And its subnets still sit in the zones pinned by ID, resolved for the region at synth
    zones = [s["Properties"].get("AvailabilityZoneId") for s in app.resources("AWS::EC2::Subnet").values()]
    assert zones == ["euw1-az1", "euw1-az2"]


def test_prod_without_an_account_and_a_region_refuses_to_synth(
    offline_context: dict[str, Any], results_code: Path,
) -> None:
    import aws_cdk as cdk

    from infra.app import build_app
    from infra.config import ConfigError

    # Given cdk.json as shipped: prod is listed as protected, its account and region left to fill in
    app = cdk.App(context={**offline_context, "stage": "prod"})

    with pytest.raises(ConfigError, match=r"stages\.prod\.account and stages\.prod\.region"):
        build_app(app, results_code=results_code, nag=False)


def test_existing_cassandra_variant(synth: Callable[[str], Synthesized]) -> None:
    app = synth("existing-cassandra")

    assert not app.resources("AWS::Cassandra::Table")
    variables = _functions(app)["Scan"]["Environment"]["Variables"]
    assert variables["CASSANDRA_MODE"] == "cassandra"
    assert variables["CASSANDRA_CONTACT_POINTS"] == "10.1.0.10,10.1.0.11"
    assert variables["CASSANDRA_SECRET_ARN"].startswith("arn:aws:secretsmanager:")
    assert "cassandra:Select" not in _actions(app, "Scan")
    assert "secretsmanager:GetSecretValue" in _actions(app, "Scan")
    services = [json.dumps(e["Properties"]["ServiceName"]) for e in app.resources("AWS::EC2::VPCEndpoint").values()]
    assert any(".secretsmanager" in s for s in services) and not any(".cassandra" in s for s in services)


@pytest.mark.parametrize("variant", ["default", "cognito-x86"])
def test_data_is_retained_on_update_and_delete_but_not_when_its_creation_rolls_back(
    synth: Callable[[str], Synthesized], variant: str,
) -> None:
    # Given retain_data=true (the default)
    app = synth(variant)
    kept = {lid: r for t in ("AWS::Cassandra::Keyspace", "AWS::Cassandra::Table", "AWS::DynamoDB::Table",
                             "AWS::Cognito::UserPool", "AWS::SecretsManager::Secret")
            for lid, r in app.resources(t).items() if not lid.startswith("Quotas")}
    # (the quota table's counters are worth nothing after their second: it goes with the stack)
    (quotas,) = [r for lid, r in app.resources("AWS::DynamoDB::Table").items() if lid.startswith("Quotas")]
    assert (quotas["DeletionPolicy"], quotas["UpdateReplacePolicy"]) == ("Delete", "Delete")

    # Then a failed first deploy deletes what it created (a keyspace's fixed name would block every retry)
    assert kept
    assert {lid: (r["DeletionPolicy"], r["UpdateReplacePolicy"]) for lid, r in kept.items()} == {
        lid: ("RetainExceptOnCreate", "Retain") for lid in kept}


def _endpoint_services(app: Synthesized) -> set[str]:
    return {json.dumps(e["Properties"]["ServiceName"]).split(".")[-1].strip('"]}')
            for e in app.resources("AWS::EC2::VPCEndpoint").values()}


def test_vpc_functions_reach_xray_and_the_results_trigger_reaches_its_failure_queue(default_app: Synthesized) -> None:
    # Subsegments of functions in the VPC need an X-Ray endpoint; the MSK pollers send failed batches to SQS
    assert {"xray", "sqs", "cassandra", "lambda", "sts", "dynamodb"} <= _endpoint_services(default_app)
    queues = [lid for lid in default_app.resources("AWS::SQS::Queue") if lid.startswith("ResultsFailedBatches")]
    alarms = [a["Properties"] for a in default_app.resources("AWS::CloudWatch::Alarm").values()]
    assert queues and any(queues[0] in json.dumps(a.get("Dimensions")) for a in alarms)
    assert any(a.get("MetricName") == "OffsetLag" for a in alarms)


def test_a_worker_can_be_run_from_the_outputs_and_the_worker_policy(default_app: Synthesized) -> None:
    # Given the outputs a user reads: where to run a worker, with which group and policy
    outputs = default_app.template["Outputs"]
    assert {"VpcId", "PrivateSubnetIds", "WorkerSecurityGroupId", "KafkaSecurityGroupId", "WorkerPolicyArn",
            "WorkerGroups", "KafkaBootstrapBrokers"} <= set(outputs)
    worker_sg = outputs["WorkerSecurityGroupId"]["Value"]["Fn::GetAtt"][0]
    kafka_sg = outputs["KafkaSecurityGroupId"]["Value"]["Fn::GetAtt"][0]

    # Then the cluster's group lets the worker group in on 9098, and the worker group may go there
    ingress = [r["Properties"] for r in default_app.resources("AWS::EC2::SecurityGroupIngress").values()]
    assert any(r["GroupId"]["Fn::GetAtt"][0] == kafka_sg and r["SourceSecurityGroupId"]["Fn::GetAtt"][0] == worker_sg
               and r["FromPort"] == 9098 for r in ingress)
    egress = [r["Properties"] for r in default_app.resources("AWS::EC2::SecurityGroupEgress").values()]
    assert any(r["GroupId"]["Fn::GetAtt"][0] == worker_sg and r.get("DestinationSecurityGroupId", {}).get(
        "Fn::GetAtt", [None])[0] == kafka_sg and r["ToPort"] == 9098 for r in egress)

    # And the worker policy reads the job topics as the listed groups and writes job-results, nothing more
    (policy,) = default_app.resources("AWS::IAM::ManagedPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    by_action = {tuple(sorted([s["Action"]] if isinstance(s["Action"], str) else s["Action"])):
                 json.dumps(s["Resource"]) for s in statements}
    assert set(by_action) == {
        ("kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently"),
        ("kafka-cluster:DescribeTopic", "kafka-cluster:ReadData"),
        ("kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"),
        ("kafka-cluster:AlterGroup", "kafka-cluster:DescribeGroup"),
    }
    assert "/jobs" in by_action[("kafka-cluster:DescribeTopic", "kafka-cluster:ReadData")]
    assert "/job-results" in by_action[("kafka-cluster:DescribeTopic", "kafka-cluster:WriteData")]
    groups = by_action[("kafka-cluster:AlterGroup", "kafka-cluster:DescribeGroup")]
    assert "/jobrunner-workers" in groups and "/example-workers" in groups and "*" not in groups


def test_workers_in_another_listed_vpc_reach_the_cluster_without_peering(synth: Callable[[str], Synthesized]) -> None:
    (cluster,) = synth("cognito-x86").resources("AWS::MSK::ServerlessCluster").values()

    own, other = cluster["Properties"]["VpcConfigs"]
    assert other == {"SubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
                     "SecurityGroups": ["sg-0123456789abcdef0"]}
    assert len(own["SubnetIds"]) == 2


def _result_key(app: Synthesized) -> str:
    """The logical id of the result key's secret."""
    (secret,) = [lid for lid in app.resources("AWS::SecretsManager::Secret") if lid.startswith("ResultKey")]
    return secret


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_result_key_is_a_generated_secret(synth: Callable[[str], Synthesized], variant: str) -> None:
    app = synth(variant)

    secret = app.resources("AWS::SecretsManager::Secret")[_result_key(app)]["Properties"]
    assert secret["GenerateSecretString"] == {"PasswordLength": 64, "ExcludePunctuation": True,
                                              "IncludeSpace": False, "RequireEachIncludedType": True}
    assert "SecretString" not in secret
    assert not app.resources("AWS::SecretsManager::RotationSchedule")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_only_the_scan_and_results_functions_know_and_may_read_the_result_key(
    synth: Callable[[str], Synthesized], variant: str,
) -> None:
    # Given the stack and its result key
    app = synth(variant)
    secret = {"Ref": _result_key(app)}
    functions = _functions(app)

    # Then the signer (scan) and the checker (results) get its ARN and may read it, that secret only
    for unit in ("Scan", "Results"):
        assert functions[unit]["Environment"]["Variables"]["JOBRUNNER_RESULT_KEY_SECRET_ARN"] == secret, unit
        reads = [s for s in _statements(app, unit) if "secretsmanager:GetSecretValue" in json.dumps(s["Action"])]
        assert [s["Resource"] for s in reads if s["Resource"] == secret] == [secret], unit
        assert all(s["Resource"] == secret or "Ref" not in json.dumps(s["Resource"]) for s in reads), unit
        assert not [s for s in reads if "*" in json.dumps(s["Resource"])], unit
    # And the api and the tick neither know where it is nor may read it
    for unit in ("Api", "Tick"):
        assert not {"JOBRUNNER_RESULT_KEY_SECRET_ARN", "JOBRUNNER_RESULT_KEY"} & set(
            functions[unit]["Environment"]["Variables"]), unit
        assert _result_key(app) not in json.dumps(_statements(app, unit)), unit
    # Nor may the workers
    worker_policies = app.resources("AWS::IAM::ManagedPolicy").values()
    assert worker_policies and "secretsmanager" not in json.dumps(list(worker_policies)).lower()
    # And nothing else in the stack may read it
    readers = sorted(p["Properties"]["Roles"][0]["Ref"].split("HandlerRole")[0]
                     for p in app.resources("AWS::IAM::Policy").values()
                     if _result_key(app) in json.dumps(p["Properties"]["PolicyDocument"]))
    assert readers == ["Results", "Scan"]


def test_the_api_and_the_tick_read_no_secret_without_an_existing_cassandra(default_app: Synthesized) -> None:
    for unit in ("Api", "Tick"):
        assert not [a for a in _actions(default_app, unit) if a.startswith("secretsmanager:")], unit


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_functions_reach_secrets_manager_through_an_endpoint(
    synth: Callable[[str], Synthesized], variant: str,
) -> None:
    # The functions' subnets have no NAT and no internet gateway: the result key is reached through the VPC endpoint
    app = synth(variant)

    # (but a stage allowing HTTPS targets has a NAT for the delivery function, which alone runs where it routes)
    https = "https" in VARIANTS[variant].get("targets", {}).get("kinds", ())
    assert bool(app.resources("AWS::EC2::NatGateway")) == bool(app.resources("AWS::EC2::InternetGateway")) == https
    isolated = {lid for lid, subnet in app.resources("AWS::EC2::Subnet").items() if lid.startswith("NetworkVpcprivate")}
    for unit, function in _functions(app).items():
        if "VpcConfig" in function and unit != "Delivery":
            assert {s["Ref"] for s in function["VpcConfig"]["SubnetIds"]} <= isolated, unit
    assert "secretsmanager" in _endpoint_services(app)


def test_the_result_key_arn_is_an_output_its_value_is_not(default_app: Synthesized) -> None:
    outputs = default_app.template["Outputs"]

    assert outputs["ResultKeySecretArn"]["Value"] == {"Ref": _result_key(default_app)}
    assert "SecretString" not in json.dumps(outputs) and "resolve:secretsmanager" not in json.dumps(outputs)


def test_the_default_stage_runs_msk_serverless(default_app: Synthesized) -> None:
    assert len(default_app.resources("AWS::MSK::ServerlessCluster")) == 1
    assert not default_app.resources("AWS::MSK::Cluster")
    assert default_app.template["Outputs"]["KafkaClusterArn"]["Description"] == "MSK Serverless cluster"


def test_a_cheaper_dev_stage_runs_a_provisioned_cluster_in_the_stacks_subnets(
    synth: Callable[[str], Synthesized],
) -> None:
    # Given stages.dev with kafka_provisioned (two kafka.t3.small brokers of 10 GiB) and endpoint_zones=1
    app = synth("dev-provisioned")

    # Then the cluster is one provisioned cluster, IAM auth only, one broker in each of the two zones
    assert not app.resources("AWS::MSK::ServerlessCluster")
    ((cluster_id, cluster),) = app.resources("AWS::MSK::Cluster").items()
    properties = cluster["Properties"]
    nodes = properties["BrokerNodeGroupInfo"]
    assert properties["ClientAuthentication"] == {"Sasl": {"Iam": {"Enabled": True}},
                                                  "Unauthenticated": {"Enabled": False}}
    assert (properties["NumberOfBrokerNodes"], nodes["InstanceType"], nodes["StorageInfo"]) == (
        2, "kafka.t3.small", {"EBSStorageInfo": {"VolumeSize": 10}})
    assert properties["ClusterName"] == "jobrunner-dev-provisioned"
    # And it sits where workers are told to run, behind the group they are told to reach
    outputs = app.template["Outputs"]
    subnets = [part for part in outputs["PrivateSubnetIds"]["Value"]["Fn::Join"][1] if part != ","]
    assert nodes["ClientSubnets"] == subnets and len(subnets) == 2
    assert nodes["SecurityGroups"] == [outputs["KafkaSecurityGroupId"]["Value"]]
    # And everything that used the serverless cluster uses it: outputs, the bootstrap string, the trigger
    arn = {"Fn::GetAtt": [cluster_id, "Arn"]}
    assert outputs["KafkaClusterArn"] == {"Description": "MSK provisioned cluster", "Value": arn}
    (mapping,) = app.resources("AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["EventSourceArn"] == arn
    for unit, function in _functions(app).items():
        variables = function["Environment"]["Variables"]
        assert variables["KAFKA_BOOTSTRAP"]["Fn::GetAtt"][1] == "BootstrapBrokerStringSaslIam", unit
        assert variables["JOBRUNNER_SEGMENTS"] == "4", unit
    assert cluster_id in json.dumps(app.resources("AWS::IAM::ManagedPolicy"))  # the worker policy's ARNs


def _interface_endpoint_subnets(app: Synthesized) -> list[int]:
    return [len(e["Properties"]["SubnetIds"]) for e in app.resources("AWS::EC2::VPCEndpoint").values()
            if e["Properties"]["VpcEndpointType"] == "Interface"]


def test_interface_endpoints_sit_in_both_zones_unless_a_stage_asks_for_one(
    default_app: Synthesized, synth: Callable[[str], Synthesized],
) -> None:
    assert _interface_endpoint_subnets(default_app) == [2] * 6
    assert _interface_endpoint_subnets(synth("dev-provisioned")) == [1] * 6


def test_the_api_counts_tenants_submissions_in_a_quota_table_the_retirers_may_only_give_back_to(
    default_app: Synthesized,
) -> None:
    # Given the default stage: every tenant limited to 25 submissions a second and 100,000 recurring jobs
    functions = _functions(default_app)
    variables = functions["Api"]["Environment"]["Variables"]
    assert json.loads(variables["JOBRUNNER_TENANT_LIMITS"]) == {
        "*": {"submissions_per_second": 25, "jobs_held": 100_000}}
    (table_id,) = [lid for lid in default_app.resources("AWS::DynamoDB::Table") if lid.startswith("Quotas")]
    table = default_app.resources("AWS::DynamoDB::Table")[table_id]["Properties"]
    assert [k["AttributeName"] for k in table["KeySchema"]] == ["tenant", "window"]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert variables["QUOTA_TABLE"] == {"Ref": table_id}
    # Then the api may read and update the counters, and nothing else touches the table
    grants = [s for s in _statements(default_app, "Api") if table_id in json.dumps(s["Resource"])]
    assert [(s["Action"], s["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"]) for s in grants] == [
        (["dynamodb:GetItem", "dynamodb:UpdateItem"], ["tenant", "window", "admitted", "expires_at", "jobs",
                                                       "per_minute", "peak", "until", "rev", "fires", "counted"])]
    # and the scan and results functions, which delete jobs after their last fire, may only give counts back
    # (not touch a rate window or a create's marker); nothing else touches the table
    for unit in ("Scan", "Results"):
        grants = [s for s in _statements(default_app, unit) if table_id in json.dumps(s["Resource"])]
        assert [(s["Action"], s["Condition"]) for s in grants] == [(["dynamodb:GetItem", "dynamodb:UpdateItem"], {
            "ForAllValues:StringEquals": {"dynamodb:Attributes": ["tenant", "window", "jobs", "per_minute", "peak",
                                                                  "until", "rev", "fires"]},
            "StringEqualsIfExists": {"dynamodb:ReturnValues": ["NONE"]}})], unit
    for unit in ("Tick", "Reconcile"):
        assert table_id not in json.dumps(_statements(default_app, unit)), unit


def test_a_stage_on_its_own_domains_says_where_their_records_point(synth: Callable[[str], Synthesized]) -> None:
    outputs = synth("cognito-x86").template["Outputs"]

    # Given api_domain and dashboard_domain: the DNS records are the user's to make, the targets are outputs
    assert "RegionalDomainName" in json.dumps(outputs["ApiDomainTarget"]["Value"])
    assert outputs["ApiDomainUrl"]["Value"] == "https://api.jobs.example.com/"
    assert "DomainName" in json.dumps(outputs["DashboardDomainTarget"]["Value"])
    # And the dashboard's address (and the runbooks the alarms link) is the domain's
    assert outputs["DashboardUrl"]["Value"] == "https://jobs.example.com/ui"
    assert "ApiDomainTarget" not in synth("default").template["Outputs"]


# Cost levers (issue #33)

def test_busy_functions_trace_when_their_caller_does_and_the_results_sample_their_logs(
        default_app: Synthesized) -> None:
    functions = _functions(default_app)
    # the tick and the reconciler, a few invocations a minute, trace actively; the scan, results and API functions
    # trace a request only when its caller's trace is sampled
    assert {unit: f["TracingConfig"]["Mode"] for unit, f in functions.items()} == {
        "Api": "PassThrough", "Scan": "PassThrough", "Results": "PassThrough", "Tick": "Active",
        "Reconcile": "Active"}
    # the results function logs its line per execution in 1 % of its invocations, warnings and errors in all
    variables = functions["Results"]["Environment"]["Variables"]
    assert (variables["POWERTOOLS_LOG_LEVEL"], variables["POWERTOOLS_LOGGER_SAMPLE_RATE"]) == ("WARNING", "0.01")
    assert "POWERTOOLS_LOG_LEVEL" not in functions["Api"]["Environment"]["Variables"]
    # point-in-time recovery on the tables nothing rebuilds, not on the schedule (an index) or the idempotency keys
    pitr = {t["Properties"]["TableName"]: t["Properties"]["PointInTimeRecoveryEnabled"]
            for t in default_app.resources("AWS::Cassandra::Table").values()}
    assert pitr == {"job_table_v2": True, "calendars": True, "task_history_v2": True, "job_changes": True,
                    "task_schedule_v2": False, "job_idempotency": False}


def test_the_small_tier_pays_nothing_it_can_leave_at_rest(synth: Callable[[str], Synthesized]) -> None:
    small = synth("small")
    assert small.error is None, small.error
    env = _functions(small)["Scan"]["Environment"]["Variables"]
    # one segment, three partitions, no provisioned pollers (on-demand mode), no tracing and no X-Ray endpoint
    assert env["JOBRUNNER_SEGMENTS"] == "1"
    (mapping,) = small.resources("AWS::Lambda::EventSourceMapping").values()
    assert "ProvisionedPollerConfig" not in mapping["Properties"]
    assert [f["TracingConfig"] for f in _functions(small).values() if "TracingConfig" in f] == []
    assert env["POWERTOOLS_TRACE_DISABLED"] == "true"
    assert "xray" not in _endpoint_services(small)
    # a provisioned Kafka cluster of two kafka.t3.small brokers; on-demand Keyspaces
    (cluster,) = small.resources("AWS::MSK::Cluster").values()
    assert cluster["Properties"]["NumberOfBrokerNodes"] == 2
    assert {t["Properties"]["BillingMode"]["Mode"] for t in small.resources("AWS::Cassandra::Table").values()} == {
        "ON_DEMAND"}


# Targets (issue 35) ----------------------------------------------------------------------------------------------


def _topic_names(app: Synthesized) -> list[str]:
    (topics,) = app.resources("Custom::KafkaTopics").values()
    return [t["Name"] for t in topics["Properties"]["Topics"]]


def _writes(app: Synthesized, unit: str) -> str:
    """The topics ``unit`` may write, as the template names them (joined)."""
    return json.dumps([s["Resource"] for s in _statements(app, unit) if "kafka-cluster:WriteData" in s["Action"]])


def test_targets_off_deploy_no_delivery_function_no_nat_and_allow_no_kind(default_app: Synthesized) -> None:
    functions = _functions(default_app)

    assert "Delivery" not in functions
    assert not default_app.resources("AWS::EC2::NatGateway")
    assert "job-deliveries" not in _topic_names(default_app) and "job-deliveries" not in _writes(default_app, "Scan")
    assert {f["Environment"]["Variables"]["JOBRUNNER_TARGET_KINDS"] for f in functions.values()} == {"none"}
    assert "DeliveryFunctionName" not in default_app.template["Outputs"]
    assert len(default_app.resources("AWS::Lambda::EventSourceMapping")) == 1  # the results function's


@pytest.mark.parametrize("variant", ["targets", "targets-aws"])
def test_targets_on_deploy_the_delivery_function_on_its_topic(
    synth: Callable[[str], Synthesized], variant: str,
) -> None:
    app = synth(variant)
    functions = _functions(app)
    kinds = ",".join(VARIANTS[variant]["targets"]["kinds"])

    # Every function reads the kinds the stage allows (the API and the scan check a job's target against them)
    assert {f["Environment"]["Variables"]["JOBRUNNER_TARGET_KINDS"] for f in functions.values()} == {kinds}
    variables = functions["Delivery"]["Environment"]["Variables"]
    assert variables["JOBRUNNER_WEBHOOK_SECRET_PREFIX"] == "jobrunner/dev/webhooks/"
    # The delivery topic is created, the scan may publish to it, the delivery function reads it as its group
    assert "job-deliveries" in _topic_names(app) and "/job-deliveries" in _writes(app, "Scan")
    (mapping,) = [m["Properties"] for m in app.resources("AWS::Lambda::EventSourceMapping").values()
                  if m["Properties"]["Topics"] == ["job-deliveries"]]
    assert mapping["AmazonManagedKafkaEventSourceConfig"]["ConsumerGroupId"] == "jobrunner-dev-delivery"
    assert mapping["FunctionName"]["Ref"].startswith("DeliveryHandlerFunction")
    # It reports to job-results, and writes no other topic
    assert "/job-results" in _writes(app, "Delivery") and "/jobs" not in _writes(app, "Delivery")
    assert "DeliveryFunctionName" in app.template["Outputs"]


def test_the_delivery_role_may_call_exactly_the_allow_lists(synth: Callable[[str], Synthesized]) -> None:
    app = synth("targets")
    statements = _statements(app, "Delivery")

    (invoke,) = [s for s in statements if s["Action"] == "lambda:InvokeFunction"]
    function, qualified = VARIANTS["targets"]["targets"]["lambda_allow"][:2]
    assert invoke["Resource"][:3] == [qualified, function, f"{function}:*"]
    assert invoke["Resource"][3]["Fn::Join"][1][-1] == ":lambda:*:210987654321:function:*"
    (send,) = [s for s in statements if s["Action"] == "sqs:SendMessage"]
    assert send["Resource"]["Fn::Join"][1][-1] == ":sqs:eu-west-1:123456789012:orders.fifo"
    # No other function may call the targets, nor, but the API (GET /webhook-secrets), keep the webhook secrets
    for unit in set(_functions(app)) - {"Delivery"}:
        others = json.dumps(_statements(app, unit))
        assert not [name for name in ("reports", "billing", "210987654321", "orders.fifo") if name in others], unit
        assert ("webhooks" in others) == (unit == "Api"), unit


def test_a_protected_stage_with_https_targets_has_a_nat_gateway_per_zone(
    synth: Callable[[str], Synthesized], offline_context: dict[str, Any], tmp_path: Path,
) -> None:
    from tests.infra.conftest import synthesize

    context = {**offline_context, **VARIANTS["cognito-x86"], "targets": {"kinds": ["https"]}}
    _app, prod = synthesize("prod-targets", context, tmp_path / "out", None, nag=False)

    assert len(prod.resources("AWS::EC2::NatGateway")) == 2  # the VPC's two zones
    assert len(synth("targets").resources("AWS::EC2::NatGateway")) == 1
    assert not synth("targets-aws").resources("AWS::EC2::NatGateway")


def test_every_function_is_updated_after_the_tables(default_app: Synthesized) -> None:
    # A release that writes a column its schema adds (job_table_v2.created_by) must find it there: every function
    # of the job runner waits for every Keyspaces table (the topic admin function writes no table)
    tables = set(default_app.resources("AWS::Cassandra::Table"))
    assert len(tables) == 6  # every table of cql/
    functions = {name: f for name, f in default_app.resources("AWS::Lambda::Function").items()
                 if "CASSANDRA_KEYSPACE" in f["Properties"].get("Environment", {}).get("Variables", {})}
    assert len(functions) == 5  # api, tick, scan, results, reconcile (no delivery on the default stage)
    for name, function in functions.items():
        assert tables <= set(function.get("DependsOn", [])), name


def test_the_results_and_delivery_triggers_share_their_provisioned_pollers(
    synth: Callable[[str], Synthesized],
) -> None:
    # Provisioned pollers are billed by the unit at rest; the stage's two MSK triggers share one group's units
    app = synth("targets")
    assert app.error is None, app.error
    configs = [m["Properties"]["ProvisionedPollerConfig"]
               for m in app.resources("AWS::Lambda::EventSourceMapping").values()]
    assert len(configs) == 2
    assert {c["PollerGroupName"] for c in configs} == {"jobrunner-dev"}
    assert all(c["MinimumPollers"] == 1 for c in configs)
