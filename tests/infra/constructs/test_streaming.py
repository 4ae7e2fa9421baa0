from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template

from infra.app import TOPIC_ADMIN
from infra.constructs.streaming import Streaming

if TYPE_CHECKING:
    import aws_cdk as cdk

    from infra.constructs.function import FunctionBase


@pytest.fixture
def streaming(stack: cdk.Stack, vpc: ec2.Vpc, base: FunctionBase) -> Streaming:
    return Streaming(
        stack, "Kafka", cluster_name="jobrunner-test", subnets=vpc.isolated_subnets,
        security_group=ec2.SecurityGroup(stack, "KafkaSg", vpc=vpc),
        topics={"jobs": 6, "job-results": 3, "job-dlq": 1}, topic_admin_code=Path(TOPIC_ADMIN), base=base,
        log_retention=logs.RetentionDays.ONE_WEEK,
    )


def _statements(stack: cdk.Stack, role: str) -> list[dict[str, Any]]:
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    return [s for p in policies.values() if p["Properties"]["Roles"][0]["Ref"].startswith(role)
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_serverless_cluster_with_iam_auth_in_the_subnets(stack: cdk.Stack, streaming: Streaming) -> None:
    Template.from_stack(stack).has_resource_properties("AWS::MSK::ServerlessCluster", {
        "ClusterName": "jobrunner-test",
        "ClientAuthentication": {"Sasl": {"Iam": {"Enabled": True}}},
        "VpcConfigs": [{"SubnetIds": Match.any_value(), "SecurityGroups": Match.any_value()}],
    })


def test_bootstrap_brokers_come_from_the_kafka_api(stack: cdk.Stack, streaming: Streaming) -> None:
    template = Template.from_stack(stack)

    (resource,) = template.find_resources("Custom::AWS").values()
    create = "".join(p if isinstance(p, str) else "<token>" for p in resource["Properties"]["Create"]["Fn::Join"][1])
    assert '"action":"getBootstrapBrokers","service":"Kafka"' in create
    assert '"outputPaths":["BootstrapBrokerStringSaslIam"]' in create
    assert stack.resolve(streaming.bootstrap_brokers)["Fn::GetAtt"][1] == "BootstrapBrokerStringSaslIam"


def json_of(stack: cdk.Stack, value: Any) -> str:
    import json

    return json.dumps(stack.resolve(value), separators=(",", ":"))


def test_topics_are_created_by_the_custom_resource(stack: cdk.Stack, streaming: Streaming) -> None:
    template = Template.from_stack(stack)

    template.has_resource_properties("Custom::KafkaTopics", {
        "Topics": [{"Name": "job-dlq", "Partitions": 1}, {"Name": "job-results", "Partitions": 3},
                   {"Name": "jobs", "Partitions": 6}],
        "BootstrapServers": {"Fn::GetAtt": [Match.string_like_regexp("KafkaBootstrapBrokers"),
                                            "BootstrapBrokerStringSaslIam"]},
    })
    template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "handler.handler", "Description": "Creates the Kafka topics (custom resource)",
        "VpcConfig": Match.any_value(),
    })
    actions = [s["Action"] for s in _statements(stack, "KafkaTopicAdminRole")]
    assert "kafka-cluster:Connect" in actions
    assert ["kafka-cluster:DescribeTopic", "kafka-cluster:CreateTopic"] in actions


def test_produce_grant_names_each_topic(stack: cdk.Stack, streaming: Streaming) -> None:
    role = iam.Role(stack, "Producer", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))

    streaming.grant_produce(role, ["jobs", "job-dlq"])
    statements = _statements(stack, "Producer")

    assert statements[0]["Action"] == ["kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently"]
    assert statements[1]["Action"] == ["kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"]
    topics = [r["Fn::Join"][1] for r in statements[1]["Resource"]]
    assert [parts[-1] for parts in topics] == ["/job-dlq", "/jobs"]
    assert all(":topic/jobrunner-test/" in parts for parts in topics)
    assert not any("*" in json_of(stack, s["Action"]) for s in statements)


def test_consume_grant_names_the_topic_and_group(stack: cdk.Stack, streaming: Streaming) -> None:
    role = iam.Role(stack, "Consumer", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))

    streaming.grant_consume(role, topic="job-results", group="g1")
    text = json_of(stack, _statements(stack, "Consumer"))

    assert '"/job-results"' in text and ":group/jobrunner-test/" in text and '"/g1"' in text
    assert "kafka-cluster:ReadData" in text and "kafka-cluster:AlterGroup" in text
    assert "kafka-cluster:WriteData" not in text


@pytest.fixture
def provisioned(stack: cdk.Stack, vpc: ec2.Vpc, base: FunctionBase) -> Streaming:
    from infra.config import ProvisionedKafka

    return Streaming(
        stack, "Kafka", cluster_name="jobrunner-test", subnets=vpc.isolated_subnets,
        security_group=ec2.SecurityGroup(stack, "KafkaSg", vpc=vpc),
        topics={"jobs": 6, "job-results": 3, "job-dlq": 1}, topic_admin_code=Path(TOPIC_ADMIN), base=base,
        log_retention=logs.RetentionDays.ONE_WEEK,
        provisioned=ProvisionedKafka(instance_type="kafka.m7g.large", brokers_per_zone=2, storage_gib=50,
                                     kafka_version="3.8.x"),
    )


def _ref(stack: cdk.Stack, construct: Any) -> str:
    return stack.get_logical_id(construct.node.default_child)


def test_provisioned_brokers_in_each_subnet_with_iam_auth_only(
    stack: cdk.Stack, vpc: ec2.Vpc, provisioned: Streaming,
) -> None:
    template = Template.from_stack(stack)

    template.resource_count_is("AWS::MSK::ServerlessCluster", 0)
    (cluster,) = template.find_resources("AWS::MSK::Cluster").values()
    properties = cluster["Properties"]
    # Given 2 subnets and 2 brokers per zone: 4 brokers, of the type and storage asked for
    assert len(vpc.isolated_subnets) == 2
    assert properties["NumberOfBrokerNodes"] == 4
    assert properties["KafkaVersion"] == "3.8.x"
    nodes = properties["BrokerNodeGroupInfo"]
    assert nodes["InstanceType"] == "kafka.m7g.large"
    assert nodes["StorageInfo"] == {"EBSStorageInfo": {"VolumeSize": 50}}
    assert nodes["ClientSubnets"] == [{"Ref": _ref(stack, s)} for s in vpc.isolated_subnets]
    (group,) = [lid for lid in template.find_resources("AWS::EC2::SecurityGroup") if lid.startswith("KafkaSg")]
    assert nodes["SecurityGroups"] == [{"Fn::GetAtt": [group, "GroupId"]}]
    # IAM clients only (no SCRAM, no TLS certificates, no anonymous), TLS to and between the brokers
    assert properties["ClientAuthentication"] == {"Sasl": {"Iam": {"Enabled": True}},
                                                  "Unauthenticated": {"Enabled": False}}
    assert properties["EncryptionInfo"] == {"EncryptionInTransit": {"ClientBroker": "TLS", "InCluster": True}}
    assert "ConfigurationInfo" not in properties  # MSK's default replication for the zones (docs/deploy.md)


def test_provisioned_broker_logs_go_to_a_log_group_with_the_retention(
    stack: cdk.Stack, provisioned: Streaming,
) -> None:
    template = Template.from_stack(stack)

    (cluster,) = template.find_resources("AWS::MSK::Cluster").values()
    group = cluster["Properties"]["LoggingInfo"]["BrokerLogs"]["CloudWatchLogs"]
    assert group["Enabled"] is True
    logs_of_brokers = template.find_resources("AWS::Logs::LogGroup")[group["LogGroup"]["Ref"]]
    assert logs_of_brokers["Properties"]["RetentionInDays"] == 7
    assert logs_of_brokers["DeletionPolicy"] == "Delete"


def test_a_provisioned_cluster_is_reached_and_granted_like_a_serverless_one(
    stack: cdk.Stack, provisioned: Streaming,
) -> None:
    role = iam.Role(stack, "Producer", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    provisioned.grant_produce(role, ["jobs"])
    template = Template.from_stack(stack)
    (cluster_id,) = template.find_resources("AWS::MSK::Cluster")
    arn = {"Fn::GetAtt": [cluster_id, "Arn"]}

    # The bootstrap brokers (IAM, 9098) from the Kafka API, on this cluster
    assert stack.resolve(provisioned.cluster_arn) == arn
    (resource,) = template.find_resources("Custom::AWS").values()
    assert arn in resource["Properties"]["Create"]["Fn::Join"][1]
    assert stack.resolve(provisioned.bootstrap_brokers)["Fn::GetAtt"][1] == "BootstrapBrokerStringSaslIam"
    # The topics by the custom resource, as for MSK Serverless
    template.resource_count_is("Custom::KafkaTopics", 1)
    # Topic ARNs under cluster/<name>/<uuid>: the uuid is the ARN's third part, whatever the cluster's kind
    (topic_arn,) = [s["Resource"] for s in _statements(stack, "Producer") if "kafka-cluster:WriteData" in s["Action"]]
    parts = topic_arn["Fn::Join"][1]
    assert ":topic/jobrunner-test/" in parts and parts[-1] == "/jobs"
    assert {"Fn::Select": [2, {"Fn::Split": ["/", arn]}]} in parts


def test_only_a_serverless_cluster_has_endpoints_in_other_vpcs(stack: cdk.Stack, vpc: ec2.Vpc,
                                                                 base: FunctionBase) -> None:
    from infra.config import KafkaClientVpc, ProvisionedKafka

    with pytest.raises(ValueError, match="client_vpcs"):
        Streaming(stack, "Kafka", cluster_name="c", subnets=vpc.isolated_subnets,
                  security_group=ec2.SecurityGroup(stack, "KafkaSg", vpc=vpc), topics={"jobs": 1},
                  topic_admin_code=Path(TOPIC_ADMIN), base=base, log_retention=logs.RetentionDays.ONE_WEEK,
                  client_vpcs=[KafkaClientVpc(("subnet-1", "subnet-2"))], provisioned=ProvisionedKafka())


def test_the_serverless_cluster_has_no_brokers_of_its_own(stack: cdk.Stack, streaming: Streaming) -> None:
    template = Template.from_stack(stack)

    template.resource_count_is("AWS::MSK::ServerlessCluster", 1)
    template.resource_count_is("AWS::MSK::Cluster", 0)


def test_a_worker_with_no_shared_topic_to_read_gets_no_read_statement(streaming: Streaming) -> None:
    # Given every topic some tenant's own: the shared worker policy has nothing to read
    statements = streaming.worker_statements(consume=[], produce=["job-results"], groups=["jobrunner-workers"])

    assert [s.to_statement_json()["Action"] for s in statements] == [
        ["kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently"],
        ["kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"],
        ["kafka-cluster:DescribeGroup", "kafka-cluster:AlterGroup"],
    ]
